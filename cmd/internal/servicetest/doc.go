// Package servicetest holds the helpers that the service's tests share:
// Policies builds a policy set from inline YAML, SyncBuffer collects logs
// that a test reads while a server writes them, Loopback and Serve run a
// server on a free loopback port for the test's life, a KeepAliveLoad
// keeps connections busy through a drain, and a ConfigMap lays files out
// as Kubernetes mounts them. Redis servers come from internal/testkit.
package servicetest
