package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// objects holds a manifest's documents, each decoded into its k8s.io/api
// type.
type objects struct {
	deployments     []*appsv1.Deployment
	services        []*corev1.Service
	configMaps      []*corev1.ConfigMap
	pdbs            []*policyv1.PodDisruptionBudget
	hpas            []*autoscalingv2.HorizontalPodAutoscaler
	serviceMonitors []*unstructured.Unstructured
}

var docSeparator = regexp.MustCompile(`(?m)^---\s*$`)

// decode splits a multi-document manifest and decodes each document
// strictly (a field the type does not have is an error: a misspelt
// livenessProbe must not pass as an unknown, ignored key).
func decode(t *testing.T, name string, data []byte) objects {
	t.Helper()
	var objs objects
	for i, doc := range docSeparator.Split(string(data), -1) {
		js, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatalf("%s document %d: %v", name, i, err)
		}
		var meta struct{ APIVersion, Kind string }
		if err := json.Unmarshal(js, &meta); err != nil {
			t.Fatalf("%s document %d: %v", name, i, err)
		}
		var into any
		switch meta.APIVersion + " " + meta.Kind {
		case " ":
			continue // comments only
		case "apps/v1 Deployment":
			into = appendNew(&objs.deployments)
		case "v1 Service":
			into = appendNew(&objs.services)
		case "v1 ConfigMap":
			into = appendNew(&objs.configMaps)
		case "policy/v1 PodDisruptionBudget":
			into = appendNew(&objs.pdbs)
		case "autoscaling/v2 HorizontalPodAutoscaler":
			into = appendNew(&objs.hpas)
		case "monitoring.coreos.com/v1 ServiceMonitor":
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(js); err != nil {
				t.Fatalf("%s document %d: %v", name, i, err)
			}
			objs.serviceMonitors = append(objs.serviceMonitors, u)
			continue
		default:
			t.Fatalf("%s document %d: %s %s is not a kind this test knows", name, i, meta.APIVersion, meta.Kind)
		}
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.DisallowUnknownFields()
		if err := dec.Decode(into); err != nil {
			t.Fatalf("%s document %d (%s): %v", name, i, meta.Kind, err)
		}
	}
	return objs
}

// appendNew appends a new zero object to list and returns it to decode into.
func appendNew[T any](list *[]*T) *T {
	v := new(T)
	*list = append(*list, v)
	return v
}

func TestManifestsAreKubernetesObjects(t *testing.T) {
	data, err := os.ReadFile("kubernetes/floodgate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs := decode(t, "kubernetes/floodgate.yaml", data)
	if n := [5]int{len(objs.deployments), len(objs.services), len(objs.configMaps), len(objs.pdbs), len(objs.hpas)}; n != [5]int{1, 2, 1, 1, 1} {
		t.Fatalf("kubernetes/floodgate.yaml holds %v Deployments, Services, ConfigMaps, PDBs, HPAs; want [1 2 1 1 1]", n)
	}
	checkDeployment(t, objs.deployments[0], objs.configMaps[0])
	checkServices(t, objs.services)
	checkPolicy(t, objs.configMaps[0])
	if pdb := objs.pdbs[0]; pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("PodDisruptionBudget maxUnavailable %v, want 1", pdb.Spec.MaxUnavailable)
	}
	if hpa := objs.hpas[0]; hpa.Spec.ScaleTargetRef.Name != objs.deployments[0].Name {
		t.Errorf("HPA scales %q, want the Deployment %q", hpa.Spec.ScaleTargetRef.Name, objs.deployments[0].Name)
	}

	data, err = os.ReadFile("kubernetes/servicemonitor.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sm := decode(t, "kubernetes/servicemonitor.yaml", data).serviceMonitors
	if len(sm) != 1 {
		t.Fatalf("kubernetes/servicemonitor.yaml holds %d ServiceMonitors, want 1", len(sm))
	}
	endpoints, _, _ := unstructured.NestedSlice(sm[0].Object, "spec", "endpoints")
	if fmt.Sprint(endpoints) != "[map[interval:30s path:/metrics port:http]]" {
		t.Errorf("ServiceMonitor endpoints %v, want /metrics on the http port", endpoints)
	}
}

// checkDeployment asserts what an operator relies on: probes on /healthz
// and /readyz, the two ports, a non-root read-only container, and the
// policy ConfigMap mounted where --config reads it.
func checkDeployment(t *testing.T, d *appsv1.Deployment, policy *corev1.ConfigMap) {
	t.Helper()
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("Deployment has %d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.String() != "http" {
			t.Errorf("%s probe %+v, want GET %s on port http", p.name, p.probe, p.path)
		}
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["http"] != 8080 || ports["grpc"] != 8081 {
		t.Errorf("container ports %v, want http 8080 and grpc 8081", ports)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if env["FLOODGATE_HTTP"] != "0.0.0.0:8080" || env["FLOODGATE_GRPC"] != "0.0.0.0:8081" {
		t.Errorf("listeners %q and %q, want every interface (0.0.0.0:8080, 0.0.0.0:8081)", env["FLOODGATE_HTTP"], env["FLOODGATE_GRPC"])
	}
	psc, sc := pod.SecurityContext, c.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Errorf("pod securityContext %+v, want runAsNonRoot and a non-zero runAsUser", psc)
	}
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil || fmt.Sprint(sc.Capabilities.Drop) != "[ALL]" {
		t.Errorf("container securityContext %+v, want a read-only root, no privilege escalation, every capability dropped", sc)
	}
	if !contains(c.Args, "--config=/etc/floodgate") {
		t.Errorf("args %v, want --config=/etc/floodgate", c.Args)
	}
	mounted := false
	for _, m := range c.VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name == m.Name && m.MountPath == "/etc/floodgate" && v.ConfigMap != nil && v.ConfigMap.Name == policy.Name {
				mounted = true
			}
		}
	}
	if !mounted {
		t.Errorf("ConfigMap %s is not mounted at /etc/floodgate", policy.Name)
	}
	if _, ok := policy.Data["policy.yaml"]; !ok {
		t.Errorf("ConfigMap %s has no policy.yaml (keys: %v)", policy.Name, policy.Data)
	}
}

// checkServices asserts one Service with the http and grpc ports and one
// headless Service that publishes pods before they are ready (memberlist
// peers find each other while starting).
func checkServices(t *testing.T, services []*corev1.Service) {
	t.Helper()
	var headless, plain *corev1.Service
	for _, s := range services {
		if s.Spec.ClusterIP == corev1.ClusterIPNone {
			headless = s
		} else {
			plain = s
		}
	}
	if headless == nil || plain == nil {
		t.Fatal("want a Service and a headless Service for memberlist peers")
	}
	ports := map[string]int32{}
	for _, p := range plain.Spec.Ports {
		ports[p.Name] = p.Port
	}
	if ports["http"] != 8080 || ports["grpc"] != 8081 {
		t.Errorf("Service ports %v, want http 8080 and grpc 8081", ports)
	}
	if !headless.Spec.PublishNotReadyAddresses {
		t.Error("headless Service does not publish pods that are not ready: starting peers cannot find each other")
	}
}

// checkPolicy runs floodgate config check on the ConfigMap's policy.
func checkPolicy(t *testing.T, cm *corev1.ConfigMap) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(file, []byte(cm.Data["policy.yaml"]), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(floodgateBin, "config", "check", file).CombinedOutput(); err != nil {
		t.Errorf("ConfigMap %s: floodgate config check: %v\n%s", cm.Name, err, out)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// helmOrSkip finds helm, or skips: the chart's checks need it, the rest
// of the package does not.
func helmOrSkip(t *testing.T) string {
	t.Helper()
	helm, err := exec.LookPath("helm")
	if err != nil {
		t.Skip("helm is not on PATH (go install helm.sh/helm/v3/cmd/helm@latest)")
	}
	return helm
}

// The checked-in manifests are what the chart renders today.
func TestManifestsAreRenderedFromTheChart(t *testing.T) {
	helmOrSkip(t)
	dir := t.TempDir()
	if out, err := exec.Command("bash", "kubernetes/render.sh", dir).CombinedOutput(); err != nil {
		t.Fatalf("kubernetes/render.sh: %v\n%s", err, out)
	}
	for _, name := range []string{"floodgate.yaml", "servicemonitor.yaml"} {
		want, _ := os.ReadFile(filepath.Join(dir, name))
		got, _ := os.ReadFile(filepath.Join("kubernetes", name))
		if !bytes.Equal(got, want) {
			t.Errorf("kubernetes/%s differs from the chart's rendering: run deploy/kubernetes/render.sh", name)
		}
	}
}

// The chart lints, and every switch of its values renders objects that
// decode strictly.
func TestChartRendersEveryVariant(t *testing.T) {
	helm := helmOrSkip(t)
	if out, err := exec.Command(helm, "lint", "--strict", "helm/floodgate").CombinedOutput(); err != nil {
		t.Fatalf("helm lint: %v\n%s", err, out)
	}
	tests := []struct {
		name string
		set  string
		want func(objects) string // "" when the rendering is right
	}{
		{"defaults: memory store, no HPA, no ServiceMonitor", "", func(o objects) string {
			if len(o.hpas)+len(o.serviceMonitors) != 0 || o.deployments[0].Spec.Replicas == nil {
				return "want replicas set and no HPA or ServiceMonitor"
			}
			return ""
		}},
		{"redis with a password from a Secret", "redis.url=rediss://redis:6380/0,redis.existingSecret=redis-auth", func(o objects) string {
			c := o.deployments[0].Spec.Template.Spec.Containers[0]
			for _, e := range c.Env {
				if e.Name == "FLOODGATE_REDIS_PASSWORD" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef.Name == "redis-auth" && contains(c.Args, "--redis=rediss://redis:6380/0") {
					return ""
				}
			}
			return "want --redis and FLOODGATE_REDIS_PASSWORD from the Secret redis-auth"
		}},
		{"gossip: memberlist on the pod's IP, joined by the headless Service", "strategy=gossip,cluster.enabled=true", func(o objects) string {
			c := o.deployments[0].Spec.Template.Spec.Containers[0]
			bind := ""
			for _, e := range c.Env {
				if e.Name == "FLOODGATE_CLUSTER_BIND" {
					bind = e.Value
				}
			}
			if bind != "$(POD_IP):7946" || !contains(c.Args, "--cluster-join=t-floodgate-peers:7946") || !contains(c.Args, "--strategy=gossip") {
				return fmt.Sprintf("bind %q args %v", bind, c.Args)
			}
			return ""
		}},
		{"HPA and ServiceMonitor", "autoscaling.enabled=true,serviceMonitor.enabled=true", func(o objects) string {
			if len(o.hpas) != 1 || len(o.serviceMonitors) != 1 || o.deployments[0].Spec.Replicas != nil {
				return "want an HPA, a ServiceMonitor and replicas left to the HPA"
			}
			return ""
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"template", "t", "helm/floodgate"}
			if tt.set != "" {
				args = append(args, "--set", tt.set)
			}
			out, err := exec.Command(helm, args...).Output()
			if err != nil {
				t.Fatalf("helm %s: %v", strings.Join(args, " "), err)
			}
			objs := decode(t, "helm template --set "+tt.set, out)
			if len(objs.deployments) != 1 || len(objs.configMaps) != 1 {
				t.Fatalf("want one Deployment and one ConfigMap, got %d and %d", len(objs.deployments), len(objs.configMaps))
			}
			checkDeployment(t, objs.deployments[0], objs.configMaps[0])
			checkServices(t, objs.services)
			if msg := tt.want(objs); msg != "" {
				t.Error(msg)
			}
		})
	}
}
