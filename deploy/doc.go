// Package deploy holds no code: its tests check the deployment files beside
// it (the Dockerfile's image aside) against Floodgate and against the types
// of the systems that read them. The Envoy configuration must be a valid v3
// Bootstrap and send descriptors that deploy/compose's policy limits; the
// Kubernetes manifests must decode strictly into the k8s.io/api types, with
// probes, ports and a non-root, read-only container; the chart must render
// what deploy/kubernetes holds (where helm is on PATH); a release build
// stamped with -ldflags must say so in `floodgate version`. The Grafana
// dashboard (grafana/) and the Prometheus alerting rules (prometheus/) may
// query only the metrics Floodgate's source declares, so that renaming one
// breaks a test rather than a dashboard; the rules pass `promtool check
// rules` and their unit tests (`promtool test rules`), and a real
// Prometheus scrapes a running floodgate serve, loads the rules and runs
// the dashboard's queries (where prometheus is on PATH, or always with
// FLOODGATE_REQUIRE_PROMETHEUS=1).
//
// It is a module of its own so that the library's and the service's
// modules never depend on k8s.io/api or Envoy's bootstrap types.
package deploy
