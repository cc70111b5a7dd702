// Package deploy holds no code: its tests check the deployment files beside
// it (the Dockerfile's image aside) against Floodgate and against the types
// of the systems that read them. The Envoy configuration must be a valid v3
// Bootstrap and send descriptors that deploy/compose's policy limits; the
// Kubernetes manifests must decode strictly into the k8s.io/api types, with
// probes, ports and a non-root, read-only container; the chart must render
// what deploy/kubernetes holds (where helm is on PATH); a release build
// stamped with -ldflags must say so in `floodgate version`.
//
// It is a module of its own so that the library's and the service's
// modules never depend on k8s.io/api or Envoy's bootstrap types.
package deploy
