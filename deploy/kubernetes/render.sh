#!/usr/bin/env bash
# Renders the plain manifests in this directory from the Helm chart, for
# kubectl apply without Helm. Run after changing deploy/helm/floodgate;
# deploy's tests fail when the files and the chart disagree (where helm is
# on PATH). helm: go install helm.sh/helm/v3/cmd/helm@latest
# An argument names another directory to write them to (the tests' check).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
chart="$here/../helm/floodgate"
out="${1:-$here}"
header="# Rendered from deploy/helm/floodgate by deploy/kubernetes/render.sh: edit the chart, not this file."
# Redis at redis:6379 (a Service of yours) and an HPA from 2 to 10 pods.
{ echo "$header"; helm template floodgate "$chart" --set redis.url=redis:6379 --set autoscaling.enabled=true; } > "$out/floodgate.yaml"
# Only where the Prometheus Operator's CRDs are installed.
{ echo "$header"; helm template floodgate "$chart" --set serviceMonitor.enabled=true --show-only templates/servicemonitor.yaml; } > "$out/servicemonitor.yaml"
