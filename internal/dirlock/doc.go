// Package dirlock keeps a store's directory to one open store at a time,
// across processes and within one.
package dirlock
