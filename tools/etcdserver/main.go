// Command etcdserver runs one real etcd member, in process, for holdfast's
// benchmark and tests: durable (every write fsync'd before it is
// acknowledged, as etcd always does), listening on loopback only.
//
//	cd tools/etcdserver && go run . --dir /tmp/etcd-bench --listen 127.0.0.1:2379
//
// It compacts its history every five minutes, as Kubernetes' API server
// has its etcd do: without, every bench run would grow the member's
// database until it refused writes at its quota. A data directory grown
// large before is not shrunk: start with a new --dir.
//
// It lives in its own module so that the etcd server's dependencies stay
// out of holdfast's.
package main

import (
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	dir := flag.String("dir", "", "data directory (required)")
	listen := flag.String("listen", "127.0.0.1:2379", "client address (host:port, loopback)")
	peer := flag.String("peer", "127.0.0.1:2380", "peer address (host:port, loopback)")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "etcdserver: --dir is required")
		os.Exit(64)
	}
	cfg := embed.NewConfig()
	cfg.Dir = *dir
	cfg.LogLevel = "error"
	cfg.AutoCompactionMode, cfg.AutoCompactionRetention = "periodic", "5m"
	client := url.URL{Scheme: "http", Host: *listen}
	peerURL := url.URL{Scheme: "http", Host: *peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peerURL}, []url.URL{peerURL}
	cfg.InitialCluster = cfg.Name + "=" + peerURL.String()

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		log.Fatalf("etcdserver: %v", err)
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
		fmt.Println("etcd ready on", client.String())
	case <-time.After(time.Minute):
		e.Server.Stop()
		log.Fatal("etcdserver: not ready within a minute")
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	select {
	case err := <-e.Err():
		log.Fatalf("etcdserver: %v", err)
	case <-stop:
	}
}
