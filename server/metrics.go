package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/holdfast/holdfast"
)

// Metrics counts requests and lock operations for /metrics. It is a
// holdfast.Observer: give the same value to holdfast.Config.Observer and
// to Config.Metrics.
type Metrics struct {
	registry *prometheus.Registry
	handler  http.Handler

	requests        *prometheus.CounterVec
	requestDuration *prometheus.HistogramVec
	operations      *prometheus.CounterVec
	opDuration      *prometheus.HistogramVec
	streams         prometheus.Gauge
}

var _ holdfast.Observer = (*Metrics)(nil)

// NewMetrics returns Metrics with its own registry, which also holds the
// Go runtime and process collectors.
func NewMetrics() *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		registry: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "holdfast_http_requests_total",
			Help: "HTTP requests by route, method and status code.",
		}, []string{"route", "method", "code"}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "holdfast_http_request_duration_seconds",
			Help:    "Time to answer HTTP requests, by route and method (event streams excluded).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"route", "method"}),
		operations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "holdfast_operations_total",
			Help: "Lock manager operations by operation and outcome (ok or an API error code).",
		}, []string{"op", "outcome"}),
		opDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "holdfast_operation_duration_seconds",
			Help:    "Time of lock manager operations, including the store's commit.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}, []string{"op"}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "holdfast_event_streams",
			Help: "Open /v1/events streams.",
		}),
	}
	reg.MustRegister(m.requests, m.requestDuration, m.operations, m.opDuration, m.streams,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	return m
}

// Registry is where further collectors (a store's, say) may register.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// Observe implements holdfast.Observer.
func (m *Metrics) Observe(op string, d time.Duration, err error) {
	outcome := "ok"
	if err != nil {
		_, outcome = classify(err)
	}
	m.operations.WithLabelValues(op, outcome).Inc()
	m.opDuration.WithLabelValues(op).Observe(d.Seconds())
}

func (m *Metrics) observeRequest(route, method string, status int, d time.Duration) {
	if !knownMethod(method) {
		method = "other"
	}
	m.requests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
	if route != "/v1/events" {
		m.requestDuration.WithLabelValues(route, method).Observe(d.Seconds())
	}
}

// knownMethod keeps made-up methods from growing the label space.
func knownMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return true
	}
	return false
}

func (m *Metrics) serveHTTP(w http.ResponseWriter, r *http.Request) {
	m.handler.ServeHTTP(w, r)
}
