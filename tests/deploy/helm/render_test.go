// The Helm chart (helm/podscope) rendered offline with render.go: with the default values and
// with ci/three-shards-values.yaml, every document is YAML with the kinds and fields a cluster
// needs; values.schema.json refuses bad values; the configs the chart writes are accepted by the
// real daemons (--check-config) when PODSCOPE_COORDINATOR_BIN and PODSCOPE_AGENT_BIN name them.
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	yaml "gopkg.in/yaml.v3"
)

const chartDir = "../../../helm/podscope"

var release = Release{Name: "podscope", Namespace: "ml-infra"}

func render(t *testing.T, overrides ...map[string]interface{}) ([]map[string]interface{}, map[string]string) {
	t.Helper()
	chart, err := LoadChart(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := chart.Render(release, overrides...)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	docs, err := Manifests(rendered)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		for _, key := range []string{"apiVersion", "kind"} {
			if s, _ := d[key].(string); s == "" {
				t.Errorf("%s: a document without %s", d["__template"], key)
			}
		}
		if name := str(d, "metadata", "name"); name == "" || len(name) > 63 {
			t.Errorf("%s: %s has no valid metadata.name (%q)", d["__template"], d["kind"], name)
		}
	}
	return docs, rendered
}

func threeShards(t *testing.T) map[string]interface{} {
	v, err := ReadValuesFile(filepath.Join(chartDir, "ci/three-shards-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// get walks maps and lists ("spec", "template", "containers", 0, ...); nil where absent.
func get(v interface{}, path ...interface{}) interface{} {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]interface{})
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]interface{})
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func str(v interface{}, path ...interface{}) string {
	s, _ := get(v, path...).(string)
	return s
}

func kinds(docs []map[string]interface{}) map[string]int {
	n := map[string]int{}
	for _, d := range docs {
		n[d["kind"].(string)]++
	}
	return n
}

func find(t *testing.T, docs []map[string]interface{}, kind, name string) map[string]interface{} {
	t.Helper()
	for _, d := range docs {
		if d["kind"] == kind && str(d, "metadata", "name") == name {
			return d
		}
	}
	t.Fatalf("no %s %s among %v", kind, name, kinds(docs))
	return nil
}

func container(t *testing.T, workload map[string]interface{}, name string) map[string]interface{} {
	t.Helper()
	for _, c := range get(workload, "spec", "template", "spec", "containers").([]interface{}) {
		if str(c, "name") == name {
			return c.(map[string]interface{})
		}
	}
	t.Fatalf("no container %s", name)
	return nil
}

func volume(t *testing.T, workload map[string]interface{}, name string) map[string]interface{} {
	t.Helper()
	for _, v := range get(workload, "spec", "template", "spec", "volumes").([]interface{}) {
		if str(v, "name") == name {
			return v.(map[string]interface{})
		}
	}
	t.Fatalf("no volume %s", name)
	return nil
}

func mount(t *testing.T, c map[string]interface{}, name string) map[string]interface{} {
	t.Helper()
	for _, m := range c["volumeMounts"].([]interface{}) {
		if str(m, "name") == name {
			return m.(map[string]interface{})
		}
	}
	t.Fatalf("no mount of %s in %s", name, c["name"])
	return nil
}

// env returns the value of a container's environment variable, and whether it is set at all.
func env(c map[string]interface{}, name string) (string, bool) {
	list, _ := c["env"].([]interface{})
	for _, e := range list {
		if str(e, "name") == name {
			return str(e, "value"), true
		}
	}
	return "", false
}

func jsonData(t *testing.T, configMap map[string]interface{}, key string) map[string]interface{} {
	t.Helper()
	var v map[string]interface{}
	if err := json.Unmarshal([]byte(str(configMap, "data", key)), &v); err != nil {
		t.Fatalf("%s %s: not JSON: %v", str(configMap, "metadata", "name"), key, err)
	}
	return v
}

func TestDefaultValuesRender(t *testing.T) {
	docs, rendered := render(t)
	want := map[string]int{"ConfigMap": 3, "DaemonSet": 1, "StatefulSet": 1, "Service": 2, "ServiceAccount": 2}
	if got := kinds(docs); !reflect.DeepEqual(got, want) {
		t.Fatalf("kinds: got %v, want %v (optional objects are off by default)", got, want)
	}

	agent := find(t, docs, "DaemonSet", "podscope-agent")
	pod := get(agent, "spec", "template", "spec")
	if str(pod, "nodeSelector", "nvidia.com/gpu.present") != "true" {
		t.Errorf("the agent is not limited to GPU nodes: %v", get(pod, "nodeSelector"))
	}
	if str(pod, "tolerations", 0, "key") != "nvidia.com/gpu" {
		t.Errorf("the agent does not tolerate the GPU taint: %v", get(pod, "tolerations"))
	}
	if get(pod, "automountServiceAccountToken") != false {
		t.Error("the agent mounts a Kubernetes API token it never uses")
	}
	c := container(t, agent, "agent")
	if str(volume(t, agent, "socket-dir"), "hostPath", "path") != "/run/podscope" ||
		str(mount(t, c, "socket-dir"), "mountPath") != "/run/podscope" {
		t.Error("the socket directory is not the host's /run/podscope at the same path")
	}
	if str(volume(t, agent, "host-proc"), "hostPath", "path") != "/proc" || get(mount(t, c, "host-proc"), "readOnly") != true ||
		str(mount(t, c, "host-proc"), "mountPath") != "/host/proc" {
		t.Error("the host's /proc is not mounted read-only at /host/proc")
	}
	if get(pod, "hostPID") != true {
		t.Errorf("the agent is not in the node's PID namespace (SO_PEERCRED gives it no pid of other pods): hostPID %v", get(pod, "hostPID"))
	}
	if str(pod, "runtimeClassName") != "nvidia" {
		t.Errorf("the agent does not run under the NVIDIA runtime (no NVML): runtimeClassName %v", get(pod, "runtimeClassName"))
	}
	for name, want := range map[string]string{"NVIDIA_VISIBLE_DEVICES": "all", "NVIDIA_DRIVER_CAPABILITIES": "utility"} {
		if got, set := env(c, name); !set || got != want {
			t.Errorf("agent env %s: got %q (set: %v), want %q", name, got, set, want)
		}
	}
	for _, ic := range get(pod, "initContainers").([]interface{}) {
		if _, set := env(ic.(map[string]interface{}), "NVIDIA_VISIBLE_DEVICES"); set {
			t.Error("the init container, which only copies files, is given the GPUs too")
		}
	}
	for _, kind := range []string{"requests", "limits"} {
		for _, r := range []string{"cpu", "memory"} {
			if get(c, "resources", kind, r) == nil {
				t.Errorf("agent resources.%s.%s missing", kind, r)
			}
		}
	}
	for _, probe := range []string{"livenessProbe", "readinessProbe"} {
		if str(c, probe, "httpGet", "port") != "health" {
			t.Errorf("agent %s does not check the health port: %v", probe, c[probe])
		}
	}
	if get(c, "securityContext", "runAsNonRoot") != true || get(c, "securityContext", "readOnlyRootFilesystem") != true {
		t.Errorf("the agent runs as root or on a writable root: %v", c["securityContext"])
	}
	args := fmt.Sprint(c["args"])
	if !strings.Contains(args, "--tls-cert=/etc/podscope/agent-tls/$(NODE_NAME).crt") {
		t.Errorf("TLS is on by default, but the agent is given no certificate of its node: %s", args)
	}
	if str(volume(t, agent, "agent-tls"), "secret", "secretName") != "podscope-agent-tls" {
		t.Error("the agent's certificates do not come from the podscope-agent-tls Secret")
	}
	agentConfig := jsonData(t, find(t, docs, "ConfigMap", "podscope-agent"), "agent.json")
	if agentConfig["coordinator"] != "podscope-coordinator:50051" || agentConfig["proc_root"] != "/host/proc" {
		t.Errorf("agent.json: %v", agentConfig)
	}

	sts := find(t, docs, "StatefulSet", "podscope-coordinator")
	if get(sts, "spec", "replicas") != 1 || str(sts, "spec", "serviceName") != "podscope-shards" {
		t.Errorf("coordinator: replicas %v, serviceName %v", get(sts, "spec", "replicas"), get(sts, "spec", "serviceName"))
	}
	if str(sts, "spec", "volumeClaimTemplates", 0, "spec", "resources", "requests", "storage") != "100Gi" {
		t.Error("the coordinator's store has no 100Gi PersistentVolumeClaim")
	}
	cc := container(t, sts, "coordinator")
	if str(mount(t, cc, "store"), "mountPath") != "/var/lib/podscope" {
		t.Error("the store's volume is not at /var/lib/podscope")
	}
	for probe, path := range map[string]string{"livenessProbe": "/healthz", "readinessProbe": "/readyz"} {
		if str(cc, probe, "httpGet", "path") != path || str(cc, probe, "httpGet", "scheme") != "HTTPS" {
			t.Errorf("coordinator %s: %v", probe, cc[probe])
		}
	}
	if str(volume(t, sts, "tls"), "secret", "secretName") != "podscope-coordinator-tls" ||
		str(volume(t, sts, "auth"), "secret", "secretName") != "podscope-tokens" {
		t.Error("the coordinator's TLS and token Secrets are not mounted")
	}
	if !strings.Contains(fmt.Sprint(cc["args"]), "--shard-name=$(POD_NAME)") {
		t.Errorf("a shard is not named after its pod: %v", cc["args"])
	}
	config := jsonData(t, find(t, docs, "ConfigMap", "podscope-coordinator"), "coordinator.json")
	if str(config, "tls", "cert") != "/etc/podscope/tls/tls.crt" || str(config, "auth", "tokens_file") != "/etc/podscope/auth/tokens" {
		t.Errorf("coordinator.json does not use the mounted TLS and token files: %v", config)
	}
	if _, insecure := config["insecure"]; insecure {
		t.Error("TLS is on, yet coordinator.json says insecure")
	}

	headless := find(t, docs, "Service", "podscope-shards")
	if str(headless, "spec", "clusterIP") != "None" {
		t.Error("the shards' Service is not headless")
	}
	find(t, docs, "Service", "podscope-coordinator")
	shards := jsonData(t, find(t, docs, "ConfigMap", "podscope-shards"), "shards.json")
	members := shards["members"].([]interface{})
	if len(members) != 1 || str(members[0], "name") != "podscope-coordinator-0" ||
		str(members[0], "grpc") != "podscope-coordinator-0.podscope-shards.ml-infra.svc:50051" {
		t.Errorf("shards.json: %v", shards)
	}

	notes := rendered["templates/NOTES.txt"]
	for _, want := range []string{"CUDA_INJECTION64_PATH", "NCCL_PROFILER_PLUGIN", "PODSCOPE_JOB",
		"mountPath: /run/podscope", "/run/podscope/lib/libpodscope_probe.so", "supplementalGroups: [2000]"} {
		if !strings.Contains(notes, want) {
			t.Errorf("NOTES.txt does not tell the user %q", want)
		}
	}
	// The pod-template snippet in NOTES.txt pastes as YAML.
	snippet := notes[strings.Index(notes, "      spec:"):strings.Index(notes, "2. Reach")]
	var template map[string]interface{}
	if err := yaml.Unmarshal([]byte(snippet), &template); err != nil {
		t.Errorf("the NOTES.txt snippet is not YAML: %v\n%s", err, snippet)
	} else {
		trainer := get(template, "spec", "containers", 0)
		if str(trainer, "env", 2, "name") != "PODSCOPE_JOB" ||
			str(trainer, "env", 2, "valueFrom", "fieldRef", "fieldPath") != "metadata.labels['batch.kubernetes.io/job-name']" {
			t.Errorf("the NOTES.txt snippet does not take PODSCOPE_JOB from the Job's label: %v", get(trainer, "env"))
		}
		for i, name := range []string{"CUDA_INJECTION64_PATH", "NCCL_PROFILER_PLUGIN"} {
			if str(trainer, "env", i, "name") != name || str(trainer, "env", i, "value") != "/run/podscope/lib/libpodscope_probe.so" {
				t.Errorf("the NOTES.txt snippet's env %d is not %s=/run/podscope/lib/libpodscope_probe.so: %v", i, name, get(trainer, "env", i))
			}
		}
		if str(trainer, "volumeMounts", 0, "mountPath") != "/run/podscope" || get(trainer, "volumeMounts", 0, "readOnly") != true ||
			str(template, "spec", "volumes", 0, "hostPath", "path") != "/run/podscope" {
			t.Errorf("the NOTES.txt snippet does not mount the agent's /run/podscope read-only: %v", template)
		}
	}
}

// Each privilege the agent takes by default can be turned off, and the NVIDIA settings changed.
func TestAgentPrivilegesFollowTheirValues(t *testing.T) {
	cases := []struct {
		name                  string
		agent                 map[string]interface{}
		runtimeClass          interface{} // nil: no runtimeClassName
		hostPID               interface{} // nil: no hostPID
		visible, capabilities string      // "": the variable is not set
	}{
		{"defaults", map[string]interface{}{}, "nvidia", true, "all", "utility"},
		{"no runtime class", map[string]interface{}{"runtimeClassName": ""}, nil, true, "all", "utility"},
		{"another runtime class", map[string]interface{}{"runtimeClassName": "nvidia-cdi"}, "nvidia-cdi", true, "all", "utility"},
		{"own PID namespace", map[string]interface{}{"hostPID": false}, "nvidia", nil, "all", "utility"},
		{"no NVIDIA variables", map[string]interface{}{"nvidia": map[string]interface{}{"visibleDevices": "", "driverCapabilities": ""}},
			"nvidia", true, "", ""},
		{"some GPUs, more capabilities", map[string]interface{}{"nvidia": map[string]interface{}{"visibleDevices": "0,1", "driverCapabilities": "utility,compute"}},
			"nvidia", true, "0,1", "utility,compute"},
	}
	for _, c := range cases {
		docs, _ := render(t, map[string]interface{}{"agent": c.agent})
		agent := find(t, docs, "DaemonSet", "podscope-agent")
		pod := get(agent, "spec", "template", "spec").(map[string]interface{})
		if got, present := pod["runtimeClassName"]; c.runtimeClass == nil && present || c.runtimeClass != nil && got != c.runtimeClass {
			t.Errorf("%s: runtimeClassName %v (present: %v), want %v", c.name, got, present, c.runtimeClass)
		}
		if got, present := pod["hostPID"]; c.hostPID == nil && present || c.hostPID != nil && got != c.hostPID {
			t.Errorf("%s: hostPID %v (present: %v), want %v", c.name, got, present, c.hostPID)
		}
		agentContainer := container(t, agent, "agent")
		for name, want := range map[string]string{"NVIDIA_VISIBLE_DEVICES": c.visible, "NVIDIA_DRIVER_CAPABILITIES": c.capabilities} {
			if got, set := env(agentContainer, name); set != (want != "") || got != want {
				t.Errorf("%s: env %s %q (set: %v), want %q", c.name, name, got, set, want)
			}
		}
		// The node's /proc stays mounted either way: without hostPID it still numbers pids as the
		// node does, and its 1/net/dev is the node's interfaces.
		if str(mount(t, agentContainer, "host-proc"), "mountPath") != "/host/proc" {
			t.Errorf("%s: /host/proc is not mounted", c.name)
		}
	}
}

func TestThreeShardsTlsAndMonitoringRender(t *testing.T) {
	docs, _ := render(t, threeShards(t))
	want := map[string]int{"ConfigMap": 4, "DaemonSet": 1, "StatefulSet": 1, "Service": 2, "ServiceAccount": 2,
		"ServiceMonitor": 1, "PrometheusRule": 1, "NetworkPolicy": 2, "PodDisruptionBudget": 1}
	if got := kinds(docs); !reflect.DeepEqual(got, want) {
		t.Fatalf("kinds: got %v, want %v", got, want)
	}
	sts := find(t, docs, "StatefulSet", "podscope-coordinator")
	if get(sts, "spec", "replicas") != 3 {
		t.Errorf("replicas: %v", get(sts, "spec", "replicas"))
	}
	if img := str(container(t, sts, "coordinator"), "image"); img != "registry.example.internal/ml-infra/podscope/coordinator:0.1.0" {
		t.Errorf("image: %s", img)
	}
	members := jsonData(t, find(t, docs, "ConfigMap", "podscope-shards"), "shards.json")["members"].([]interface{})
	if len(members) != 3 {
		t.Fatalf("%d shard members, want 3", len(members))
	}
	for i, m := range members {
		host := fmt.Sprintf("podscope-coordinator-%d.podscope-shards.ml-infra.svc", i)
		if str(m, "name") != fmt.Sprintf("podscope-coordinator-%d", i) || str(m, "rest") != "https://"+host+":8443" ||
			str(m, "grpc") != host+":50051" {
			t.Errorf("member %d: %v", i, m)
		}
	}
	config := jsonData(t, find(t, docs, "ConfigMap", "podscope-coordinator"), "coordinator.json")
	if get(config, "capture", "max_duration_ms") != 60000.0 || str(config, "notify", "alertmanagers", 0) == "" {
		t.Errorf("coordinator.config and notify are not merged into coordinator.json: %v", config)
	}

	agent := find(t, docs, "DaemonSet", "podscope-agent")
	csi := volume(t, agent, "agent-tls")["csi"]
	if str(csi, "driver") != "csi.cert-manager.io" || str(csi, "volumeAttributes", "csi.cert-manager.io/issuer-kind") != "ClusterIssuer" ||
		str(csi, "volumeAttributes", "csi.cert-manager.io/common-name") != "${POD_NAME}" {
		t.Errorf("csi certificates: %v", csi)
	}
	if args := fmt.Sprint(container(t, agent, "agent")["args"]); !strings.Contains(args, "--tls-cert=/etc/podscope/agent-tls/tls.crt") {
		t.Errorf("with csi the agent must read tls.crt: %s", args)
	}

	sm := find(t, docs, "ServiceMonitor", "podscope-coordinator")
	if str(sm, "spec", "endpoints", 0, "scheme") != "https" || str(sm, "spec", "endpoints", 0, "tlsConfig", "ca", "secret", "key") != "ca.crt" ||
		str(sm, "metadata", "labels", "release") != "kube-prometheus-stack" {
		t.Errorf("ServiceMonitor: %v", sm)
	}
	// The PrometheusRule carries deploy/prometheus/podscope-rules.yml unchanged (promtool checks that file).
	rule := find(t, docs, "PrometheusRule", "podscope")
	var rules map[string]interface{}
	data, err := os.ReadFile("../../../deploy/prometheus/podscope-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &rules); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rule["spec"], rules) {
		t.Errorf("the PrometheusRule's spec is not deploy/prometheus/podscope-rules.yml")
	}
	dashboard := jsonData(t, find(t, docs, "ConfigMap", "podscope-dashboard"), "podscope-dashboard.json")
	if str(dashboard, "title") == "" || len(get(dashboard, "panels").([]interface{})) == 0 {
		t.Error("the dashboard ConfigMap holds no dashboard")
	}
	policy := find(t, docs, "NetworkPolicy", "podscope-coordinator")
	from := fmt.Sprint(get(policy, "spec", "ingress", 0, "from"))
	if !strings.Contains(from, "ml-platform") || !strings.Contains(from, "component:coordinator") {
		t.Errorf("REST ingress must admit restFrom and peer shards: %s", from)
	}
	if get(find(t, docs, "PodDisruptionBudget", "podscope-coordinator"), "spec", "maxUnavailable") != 1 {
		t.Error("PodDisruptionBudget maxUnavailable")
	}
}

func TestInsecureRendersWithoutSecrets(t *testing.T) {
	docs, rendered := render(t, map[string]interface{}{"tls": map[string]interface{}{"enabled": false}})
	config := jsonData(t, find(t, docs, "ConfigMap", "podscope-coordinator"), "coordinator.json")
	if config["insecure"] != true || config["tls"] != nil || config["auth"] != nil {
		t.Errorf("tls.enabled=false: %v", config)
	}
	sts := find(t, docs, "StatefulSet", "podscope-coordinator")
	if str(container(t, sts, "coordinator"), "livenessProbe", "httpGet", "scheme") != "HTTP" {
		t.Error("a plaintext coordinator probed over HTTPS")
	}
	if !strings.Contains(rendered["templates/NOTES.txt"], "WARNING: tls.enabled=false") {
		t.Error("NOTES.txt does not warn about plaintext")
	}
}

func TestSchemaRefusesBadValues(t *testing.T) {
	chart, err := LoadChart(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		values string
		want   string
	}{
		"replicas not a number":        {"coordinator: {replicas: three}", "coordinator.replicas"},
		"no shards":                    {"coordinator: {replicas: 0}", "coordinator.replicas"},
		"misspelt key":                 {"coordinatr: {replicas: 3}", "coordinatr"},
		"misspelt nested key":          {"agent: {socketdir: /run/x}", "socketdir"},
		"unknown cert source":          {"tls: {agentCertificates: {source: vault}}", "tls.agentCertificates.source"},
		"port out of range":            {"coordinator: {ports: {rest: 70000}}", "coordinator.ports.rest"},
		"relative socket dir":          {"agent: {socketDir: run/podscope}", "agent.socketDir"},
		"bad forward mode":             {"coordinator: {forward: teleport}", "coordinator.forward"},
		"hostPID not a boolean":        {"agent: {hostPID: \"yes\"}", "agent.hostPID"},
		"runtime class not a string":   {"agent: {runtimeClassName: 5}", "agent.runtimeClassName"},
		"runtime class not a name":     {"agent: {runtimeClassName: NVIDIA Runtime}", "agent.runtimeClassName"},
		"visible devices not a string": {"agent: {nvidia: {visibleDevices: true}}", "agent.nvidia.visibleDevices"},
		"capabilities not a list":      {"agent: {nvidia: {driverCapabilities: \"utility; compute\"}}", "agent.nvidia.driverCapabilities"},
		"misspelt NVIDIA key":          {"agent: {nvidia: {visibledevices: all}}", "visibledevices"},
		"NVIDIA settings not a map":    {"agent: {nvidia: all}", "agent.nvidia"},
	}
	for name, c := range cases {
		var v map[string]interface{}
		if err := yaml.Unmarshal([]byte(c.values), &v); err != nil {
			t.Fatal(err)
		}
		_, err := chart.Render(release, v)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want an error naming %s, got %v", name, c.want, err)
		}
	}
	// `required`: TLS on without the coordinator's Secret.
	_, err = chart.Render(release, map[string]interface{}{"tls": map[string]interface{}{"coordinatorSecret": ""}})
	if err == nil || !strings.Contains(err.Error(), "tls.coordinatorSecret is required") {
		t.Errorf("want the required coordinatorSecret error, got %v", err)
	}
}

// writeCertificate writes a self-signed certificate and key for name.
func writeCertificate(t *testing.T, dir, name, certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	template := x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, DNSNames: []string{name}}
	der, err := x509.CreateCertificate(rand.Reader, &template, &template, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDer, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(path, kind string, b []byte) {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, certFile), "CERTIFICATE", der)
	write(filepath.Join(dir, keyFile), "EC PRIVATE KEY", keyDer)
}

// The configs the chart writes, with the files it mounts laid out under a temporary root, are
// accepted by the real daemons' --check-config (their loaders refuse any unknown key).
func TestDaemonsAcceptTheRenderedConfigs(t *testing.T) {
	coordinator, agent := os.Getenv("PODSCOPE_COORDINATOR_BIN"), os.Getenv("PODSCOPE_AGENT_BIN")
	if coordinator == "" || agent == "" {
		t.Fatal("PODSCOPE_COORDINATOR_BIN and PODSCOPE_AGENT_BIN must name the built daemons (ctest sets them)")
	}
	samples := map[string][]map[string]interface{}{
		"defaults":     nil,
		"three-shards": {threeShards(t)},
		"insecure":     {{"tls": map[string]interface{}{"enabled": false}}},
	}
	names := make([]string, 0, len(samples))
	for n := range samples {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		docs, _ := render(t, samples[name]...)
		root := t.TempDir()
		rebase := func(s string) string { return strings.ReplaceAll(s, "/etc/podscope/", root+"/etc/podscope/") }
		write := func(path, text string) {
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		write(root+"/etc/podscope/shards/shards.json", str(find(t, docs, "ConfigMap", "podscope-shards"), "data", "shards.json"))
		write(root+"/etc/podscope/coordinator.json", rebase(str(find(t, docs, "ConfigMap", "podscope-coordinator"), "data", "coordinator.json")))
		write(root+"/etc/podscope/agent.json", rebase(str(find(t, docs, "ConfigMap", "podscope-agent"), "data", "agent.json")))
		writeCertificate(t, root, "podscope-coordinator", "etc/podscope/tls/tls.crt", "etc/podscope/tls/tls.key")
		writeCertificate(t, root, "podscope-coordinator", "etc/podscope/tls/ca.crt", "etc/podscope/tls/ca.key")
		writeCertificate(t, root, "gpu-node-7", "etc/podscope/agent-tls/gpu-node-7.crt", "etc/podscope/agent-tls/gpu-node-7.key")
		writeCertificate(t, root, "gpu-node-7", "etc/podscope/agent-tls/ca.crt", "etc/podscope/agent-tls/ca.key")
		writeCertificate(t, root, "podscope-agent-x7k2p", "etc/podscope/agent-tls/tls.crt", "etc/podscope/agent-tls/tls.key")
		// A token file holds at least one line (an empty one would lock every caller out).
		hash := exec.Command(coordinator, "hash-token", "--role", "admin", "--name", "ops")
		hash.Stdin = strings.NewReader("k3Jq9vX2mPz7Lr4tWn8YbQe5Hs1Uc6Ad\n")
		line, err := hash.Output()
		if err != nil {
			t.Fatalf("hash-token: %v", err)
		}
		write(root+"/etc/podscope/auth/tokens", string(line))

		// The args the pods run with, their $(VAR)s expanded as the kubelet does, paths rebased.
		expand := func(args interface{}, vars map[string]string) []string {
			var out []string
			for _, a := range args.([]interface{}) {
				s := rebase(a.(string))
				s = strings.ReplaceAll(s, "/var/lib/podscope/", root+"/var/lib/podscope/")
				for k, v := range vars {
					s = strings.ReplaceAll(s, "$("+k+")", v)
				}
				out = append(out, s)
			}
			return out
		}
		sts := find(t, docs, "StatefulSet", "podscope-coordinator")
		args := expand(container(t, sts, "coordinator")["args"], map[string]string{"POD_NAME": "podscope-coordinator-0"})
		out, err := exec.Command(coordinator, append(args, "--check-config")...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "config OK") {
			t.Errorf("%s: podscope-coordinator %v --check-config: %v\n%s", name, args, err, out)
		}
		ds := find(t, docs, "DaemonSet", "podscope-agent")
		args = expand(container(t, ds, "agent")["args"], map[string]string{"NODE_NAME": "gpu-node-7"})
		out, err = exec.Command(agent, append(args, "--check-config")...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "config OK") {
			t.Errorf("%s: podscope-agent %v --check-config: %v\n%s", name, args, err, out)
		}
	}
}
