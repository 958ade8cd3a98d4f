package deploytest

// Tests of the container packaging: docker-compose.yml against the Compose
// specification and against the files it mounts, and the Dockerfile's
// stages, its binaries run as the image would. No Docker engine is needed.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kaptinlin/jsonschema"
	"go.yaml.in/yaml/v3"
)

// composeRoot is the repository root as seen from this package's directory,
// where go test runs; it is also the Compose project directory, against
// which the relative paths of docker-compose.yml resolve.
const composeRoot = "../.."

// TestComposeFileValidates checks docker-compose.yml: it is valid against
// the Compose specification's schema, it wires sampled, Prometheus, Grafana
// and the ollama profile as documented, and everything it builds from or
// mounts exists in the repository.
func TestComposeFileValidates(t *testing.T) {
	doc := composeLoad(t)

	t.Run("schema", func(t *testing.T) {
		schema := composeSchema(t)
		if res := schema.Validate(doc); !res.IsValid() {
			t.Fatalf("docker-compose.yml does not validate against reference/compose/compose-spec.json:\n%s",
				strings.Join(composeSchemaErrors(res), "\n"))
		}
		// The schema must be able to say no: common mistakes are rejected.
		mistakes := []struct {
			name   string
			mutate func(doc map[string]any)
		}{
			{"misspelt top-level key", func(doc map[string]any) { doc["servcies"] = map[string]any{} }},
			{"misspelt service key", func(doc map[string]any) {
				composeMap(composeMap(doc["services"])["sampled"])["helthcheck"] = map[string]any{"test": []any{"CMD", "/healthcheck"}}
			}},
			{"unknown depends_on condition", func(doc map[string]any) {
				composeMap(composeMap(doc["services"])["prometheus"])["depends_on"] = map[string]any{"sampled": map[string]any{"condition": "service_healty"}}
			}},
			{"ports not a list", func(doc map[string]any) { composeMap(composeMap(doc["services"])["sampled"])["ports"] = "8080:8080" }},
		}
		for _, m := range mistakes {
			bad, err := composeJSON(doc)
			if err != nil {
				t.Fatal(err)
			}
			m.mutate(bad)
			if schema.Validate(bad).IsValid() {
				t.Errorf("%s: the schema accepted it; validation is not effective", m.name)
			}
		}
	})

	if _, ok := doc["version"]; ok {
		t.Error("top-level version: obsolete in the Compose specification, remove it")
	}
	services := composeMap(doc["services"])

	t.Run("sampled", func(t *testing.T) {
		svc := composeService(t, services, "sampled")
		if composeMap(svc["build"]) == nil {
			t.Error("sampled: no build section; it must be built from the Dockerfile")
		}
		hc := composeMap(svc["healthcheck"])
		test := composeStrings(hc["test"])
		if len(test) < 2 || test[0] != "CMD" {
			t.Fatalf("sampled: healthcheck.test = %q, want [CMD /healthcheck]", test)
		}
		// The probe must be a binary the image actually contains.
		if copied := dockerfileFinalCopies(t, dockerfileParse(t)); !slices.Contains(copied, test[1]) {
			t.Errorf("sampled: healthcheck runs %s, but the Dockerfile's final stage copies only %q", test[1], copied)
		}
		if got := hc["interval"]; got != "10s" {
			t.Errorf("sampled: healthcheck.interval = %v, want 10s", got)
		}
		for key, want := range map[string]any{"restart": "unless-stopped", "read_only": true} {
			if svc[key] != want {
				t.Errorf("sampled: %s = %v, want %v", key, svc[key], want)
			}
		}
		if !slices.Contains(composeStrings(svc["cap_drop"]), "ALL") {
			t.Errorf("sampled: cap_drop = %v, want [ALL]", svc["cap_drop"])
		}
		if !slices.Contains(composeStrings(svc["security_opt"]), "no-new-privileges:true") {
			t.Errorf("sampled: security_opt = %v, want no-new-privileges:true", svc["security_opt"])
		}
		if !slices.Contains(composeInterpolated(t, "ports", composeStrings(svc["ports"])), "127.0.0.1:8080:8080") {
			t.Errorf("sampled: ports = %v, want 127.0.0.1:8080:8080", svc["ports"])
		}
		raw := composeRawEnv(t, "sampled", svc)
		if raw["SAMPLED_LOG_FORMAT"] != "json" {
			t.Errorf("sampled: SAMPLED_LOG_FORMAT = %q, want json", raw["SAMPLED_LOG_FORMAT"])
		}
		// The provider settings are passed through from the host.
		for _, name := range []string{"SAMPLED_CONFIG", "SAMPLING_PROVIDER", "SAMPLING_API_KEY", "SAMPLING_ENDPOINT", "SAMPLING_MODEL"} {
			v, ok := raw[name]
			if !ok {
				t.Errorf("sampled: environment lacks %s", name)
				continue
			}
			if !strings.HasPrefix(v, "${"+name) {
				t.Errorf("sampled: %s = %q, want it taken from the host (${%s:-default})", name, v, name)
			}
		}
		if got := composeEnv(t, "sampled", svc)["SAMPLING_PROVIDER"]; got != "offline" {
			t.Errorf("sampled: SAMPLING_PROVIDER defaults to %q, want offline", got)
		}
	})

	t.Run("prometheus", func(t *testing.T) {
		svc := composeService(t, services, "prometheus")
		mounts := composeMounts(t, "prometheus", svc)
		if !composeHasBind(mounts, "deploy/prometheus", "/etc/prometheus") {
			t.Errorf("prometheus: want ./deploy/prometheus mounted at /etc/prometheus, have %+v", mounts)
		}
		cfg := ""
		for _, arg := range composeStrings(svc["command"]) {
			if v, ok := strings.CutPrefix(arg, "--config.file="); ok {
				cfg = v
			}
		}
		if cfg != "/etc/prometheus/prometheus.yml" {
			t.Errorf("prometheus: command sets --config.file=%q, want /etc/prometheus/prometheus.yml", cfg)
		}
		if !slices.Contains(composeInterpolated(t, "ports", composeStrings(svc["ports"])), "127.0.0.1:9090:9090") {
			t.Errorf("prometheus: ports = %v, want 127.0.0.1:9090:9090", svc["ports"])
		}
		if got := composeDependsOn(svc)["sampled"]; got != "service_healthy" {
			t.Errorf("prometheus: depends_on sampled with condition %q, want service_healthy", got)
		}
		if cfg == "" {
			return
		}
		host, ok := composeHostPath(mounts, cfg)
		if !ok {
			t.Fatalf("prometheus: %s is not inside a bind mount", cfg)
		}
		composePrometheusAgrees(t, services, mounts, cfg, host)
	})

	t.Run("grafana", func(t *testing.T) {
		svc := composeService(t, services, "grafana")
		mounts := composeMounts(t, "grafana", svc)
		for src, dst := range map[string]string{
			"deploy/grafana/provisioning": "/etc/grafana/provisioning",
			"deploy/grafana/dashboards":   "/var/lib/grafana/dashboards",
		} {
			if !composeHasBind(mounts, src, dst) {
				t.Errorf("grafana: want ./%s mounted at %s, have %+v", src, dst, mounts)
			}
		}
		env := composeEnv(t, "grafana", svc)
		for name, want := range map[string]string{"GF_AUTH_ANONYMOUS_ENABLED": "true", "GF_AUTH_ANONYMOUS_ORG_ROLE": "Viewer"} {
			if env[name] != want {
				t.Errorf("grafana: %s = %q, want %q", name, env[name], want)
			}
		}
		if _, ok := composeDependsOn(svc)["prometheus"]; !ok {
			t.Error("grafana: does not depend on prometheus")
		}
		home := env["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
		if home == "" {
			t.Fatal("grafana: GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH is not set")
		}
		host, ok := composeHostPath(mounts, home)
		if !ok || !composeUnder(host, filepath.Join(composeRoot, "deploy", "grafana", "dashboards")) {
			t.Fatalf("grafana: home dashboard %s is not in the mounted deploy/grafana/dashboards", home)
		}
		t.Run("home dashboard", func(t *testing.T) {
			b, err := os.ReadFile(host)
			if errors.Is(err, fs.ErrNotExist) {
				t.Skipf("%s does not exist yet (it is written separately); its existence is not checked", composeRel(host))
			}
			if err != nil {
				t.Fatal(err)
			}
			var dash struct {
				UID string `json:"uid"`
			}
			if err := json.Unmarshal(b, &dash); err != nil {
				t.Fatalf("%s: Grafana cannot load it: %v", composeRel(host), err)
			}
			if dash.UID != "sampled" {
				t.Errorf("%s: uid %q, want sampled", composeRel(host), dash.UID)
			}
		})
		t.Run("provisioning", func(t *testing.T) {
			composeGrafanaAgrees(t, services, mounts)
		})
	})

	t.Run("ollama profile", func(t *testing.T) {
		for _, name := range []string{"ollama", "ollama-pull", "sampled-ollama"} {
			svc := composeService(t, services, name)
			if got := composeStrings(svc["profiles"]); !slices.Equal(got, []string{"ollama"}) {
				t.Errorf("%s: profiles = %q, want [ollama]", name, got)
			}
		}
		ollama, pull, so := composeService(t, services, "ollama"), composeService(t, services, "ollama-pull"), composeService(t, services, "sampled-ollama")
		if !slices.Contains(composeInterpolated(t, "ports", composeStrings(ollama["ports"])), "127.0.0.1:11434:11434") {
			t.Errorf("ollama: ports = %v, want 127.0.0.1:11434:11434", ollama["ports"])
		}
		if !slices.ContainsFunc(composeMounts(t, "ollama", ollama), func(m composeMount) bool { return !m.bind && m.target == "/root/.ollama" }) {
			t.Error("ollama: no volume at /root/.ollama for the models")
		}
		if pull["image"] != ollama["image"] {
			t.Errorf("ollama-pull: image %v, want ollama's %v", pull["image"], ollama["image"])
		}
		if got := composeEnv(t, "ollama-pull", pull)["OLLAMA_HOST"]; got != "ollama:11434" {
			t.Errorf("ollama-pull: OLLAMA_HOST = %q, want ollama:11434", got)
		}
		if _, ok := composeDependsOn(pull)["ollama"]; !ok {
			t.Error("ollama-pull: does not depend on ollama")
		}
		if got := composeDependsOn(so)["ollama-pull"]; got != "service_completed_successfully" {
			t.Errorf("sampled-ollama: depends_on ollama-pull with condition %q, want service_completed_successfully", got)
		}
		if !composeEqual(so["build"], composeService(t, services, "sampled")["build"]) {
			t.Errorf("sampled-ollama: build %v differs from sampled's", so["build"])
		}
		if !slices.Contains(composeInterpolated(t, "ports", composeStrings(so["ports"])), "127.0.0.1:8081:8080") {
			t.Errorf("sampled-ollama: ports = %v, want 127.0.0.1:8081:8080", so["ports"])
		}
		if composeMap(so["healthcheck"]) == nil {
			t.Error("sampled-ollama: no healthcheck")
		}
		env := composeEnv(t, "sampled-ollama", so)
		if env["SAMPLING_PROVIDER"] != "ollama" || env["SAMPLING_ENDPOINT"] != "http://ollama:11434" {
			t.Errorf("sampled-ollama: SAMPLING_PROVIDER=%q SAMPLING_ENDPOINT=%q, want ollama and http://ollama:11434",
				env["SAMPLING_PROVIDER"], env["SAMPLING_ENDPOINT"])
		}
		// The model sampled-ollama asks for is the one ollama-pull fetched.
		pulled := strings.Join(composeInterpolated(t, "ollama-pull", append(composeStrings(pull["entrypoint"]), composeStrings(pull["command"])...)), " ")
		if model := env["SAMPLING_MODEL"]; model == "" || !strings.Contains(pulled, "pull "+model) {
			t.Errorf("sampled-ollama: SAMPLING_MODEL %q is not the model ollama-pull pulls (%q)", model, pulled)
		}
	})

	t.Run("tracing profile", func(t *testing.T) {
		jaeger := composeService(t, services, "jaeger")
		if got := composeStrings(jaeger["profiles"]); !slices.Equal(got, []string{"tracing"}) {
			t.Errorf("jaeger: profiles = %q, want [tracing]", got)
		}
		if !slices.Contains(composeInterpolated(t, "ports", composeStrings(jaeger["ports"])), "127.0.0.1:16686:16686") {
			t.Errorf("jaeger: ports = %v, want 127.0.0.1:16686:16686", jaeger["ports"])
		}
		// The endpoint the header comment gives sampled reaches the
		// profile's OTLP/HTTP receiver, and sampled takes it from the host.
		env := composeMap(composeService(t, services, "sampled")["environment"])
		if env["OTEL_EXPORTER_OTLP_ENDPOINT"] != "${OTEL_EXPORTER_OTLP_ENDPOINT:-}" {
			t.Errorf("sampled: OTEL_EXPORTER_OTLP_ENDPOINT = %v, want it passed on from the host", env["OTEL_EXPORTER_OTLP_ENDPOINT"])
		}
		if !strings.Contains(string(deployReadFile(t, filepath.Join(composeRoot, "docker-compose.yml"))), "OTEL_EXPORTER_OTLP_ENDPOINT=http://jaeger:4318 docker compose --profile tracing up -d") {
			t.Error("docker-compose.yml does not say how to start the tracing profile")
		}
	})

	t.Run("replicas profile", func(t *testing.T) {
		redis := composeService(t, services, "redis")
		for _, name := range []string{"redis", "sampled-a", "sampled-b"} {
			svc := composeService(t, services, name)
			if got := composeStrings(svc["profiles"]); !slices.Equal(got, []string{"replicas"}) {
				t.Errorf("%s: profiles = %q, want [replicas]", name, got)
			}
		}
		if cmd := strings.Join(composeStrings(redis["command"]), " "); !strings.Contains(cmd, "--appendonly yes") || !strings.Contains(cmd, "--appendfsync always") {
			t.Errorf("redis: command %q, want --appendonly yes --appendfsync always (recorded events survive a restart or crash of Redis)", cmd)
		}
		if !slices.ContainsFunc(composeMounts(t, "redis", redis), func(m composeMount) bool { return !m.bind && m.target == "/data" }) {
			t.Error("redis: no volume at /data for the append-only file")
		}
		if composeMap(redis["healthcheck"]) == nil {
			t.Error("redis: no healthcheck")
		}
		if len(composeStrings(redis["ports"])) != 0 {
			t.Errorf("redis: ports %v; Redis has no password here and must not be published", redis["ports"])
		}
		sampled := composeService(t, services, "sampled")
		for name, port := range map[string]string{"sampled-a": "8082", "sampled-b": "8083"} {
			svc := composeService(t, services, name)
			if !composeEqual(svc["build"], sampled["build"]) || !composeEqual(svc["healthcheck"], sampled["healthcheck"]) || svc["read_only"] != true {
				t.Errorf("%s: not built, checked and hardened as sampled is", name)
			}
			if want := "127.0.0.1:" + port + ":8080"; !slices.Contains(composeInterpolated(t, "ports", composeStrings(svc["ports"])), want) {
				t.Errorf("%s: ports = %v, want %s", name, svc["ports"], want)
			}
			env := composeEnv(t, name, svc)
			if env["SAMPLED_ADDR"] != ":8080" {
				t.Errorf("%s: SAMPLED_ADDR = %q, want :8080", name, env["SAMPLED_ADDR"])
			}
			// Both on the redis service, on a port it listens on.
			u, err := url.Parse(env["SAMPLED_REDIS_URL"])
			if err != nil || u.Scheme != "redis" || u.Hostname() != "redis" || !slices.Contains(composeContainerPorts(redis), u.Port()) {
				t.Errorf("%s: SAMPLED_REDIS_URL = %q, want redis://redis:<a port redis listens on>", name, env["SAMPLED_REDIS_URL"])
			}
			if got := composeDependsOn(svc)["redis"]; got != "service_healthy" {
				t.Errorf("%s: depends_on redis with condition %q, want service_healthy", name, got)
			}
		}
		if a, b := composeEnv(t, "sampled-a", composeService(t, services, "sampled-a")), composeEnv(t, "sampled-b", composeService(t, services, "sampled-b")); !composeEqual(a, b) {
			t.Errorf("the replicas' environments differ:\n%v\n%v", a, b)
		}
	})

	t.Run("default stack", func(t *testing.T) {
		// `docker compose up` starts exactly the services without a profile.
		var always []string
		for name := range services {
			if len(composeStrings(composeMap(services[name])["profiles"])) == 0 {
				always = append(always, name)
			}
		}
		sort.Strings(always)
		if want := []string{"grafana", "prometheus", "sampled"}; !slices.Equal(always, want) {
			t.Errorf("services without a profile: %q, want %q", always, want)
		}
	})

	t.Run("references", func(t *testing.T) {
		composeReferences(t, doc, services)
	})

	t.Run("access", func(t *testing.T) {
		composeAccess(t, doc, services)
	})
}

// composeAccess checks what keeps the stack closed by default: sampled
// listens on every interface inside its container (SAMPLED_ADDR=:8080, its
// own default being loopback), Grafana's admin password comes from a
// variable, and every file the example configuration's apiKeyFile entries
// name is a compose secret of the sampled service.
func composeAccess(t *testing.T, doc, services map[string]any) {
	t.Helper()
	for _, name := range []string{"sampled", "sampled-ollama"} {
		if got := composeEnv(t, name, composeService(t, services, name))["SAMPLED_ADDR"]; got != ":8080" {
			t.Errorf("%s: SAMPLED_ADDR = %q, want :8080 (the service's own default is loopback)", name, got)
		}
	}
	if raw := composeRawEnv(t, "grafana", composeService(t, services, "grafana"))["GF_SECURITY_ADMIN_PASSWORD"]; !strings.HasPrefix(raw, "${GRAFANA_ADMIN_PASSWORD") {
		t.Errorf("grafana: GF_SECURITY_ADMIN_PASSWORD = %q, want it from ${GRAFANA_ADMIN_PASSWORD…}", raw)
	}
	declared := composeMap(doc["secrets"])
	for name, d := range declared {
		// A secret's file must exist, or compose up fails.
		if f, ok := composeMap(d)["file"].(string); ok {
			path := filepath.Join(composeRoot, composeInterpolated(t, "secrets."+name, []string{f})[0])
			if _, err := os.Stat(path); err != nil {
				t.Errorf("secret %s: file %s: %v", name, f, err)
			}
		}
	}
	has := map[string]bool{}
	for _, sec := range composeStrings(composeService(t, services, "sampled")["secrets"]) {
		has[sec] = true
		if _, ok := declared[sec]; !ok {
			t.Errorf("sampled: secret %s is not declared under top-level secrets", sec)
		}
	}
	var example struct {
		Providers []struct {
			APIKeyFile string `yaml:"apiKeyFile"`
		} `yaml:"providers"`
		APIKeys []struct {
			KeyFile string `yaml:"keyFile"`
		} `yaml:"apiKeys"`
	}
	b, err := os.ReadFile(filepath.Join(composeRoot, "deploy/sampled.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &example); err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, p := range example.Providers {
		files = append(files, p.APIKeyFile)
	}
	for _, k := range example.APIKeys {
		files = append(files, k.KeyFile)
	}
	n := 0
	for _, f := range files {
		if f == "" {
			continue
		}
		n++
		sec, ok := strings.CutPrefix(f, "/run/secrets/")
		if !ok || !has[sec] {
			t.Errorf("deploy/sampled.example.yaml reads %s, which no secret of the sampled service provides", f)
		}
	}
	if n == 0 {
		t.Error("deploy/sampled.example.yaml names no key file: nothing to check")
	}
}

// composeReferences checks what each service refers to: services it
// depends on, its build context and Dockerfile, the host paths it mounts,
// declared named volumes, pinned images and distinct host ports.
func composeReferences(t *testing.T, doc, services map[string]any) {
	t.Helper()
	volumes := composeMap(doc["volumes"])
	hostPorts := map[string]string{}
	names := make([]string, 0, len(services))
	for name := range services {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		svc := composeMap(services[name])
		profiled := len(composeStrings(svc["profiles"])) > 0
		for dep := range composeDependsOn(svc) {
			d, ok := services[dep]
			if !ok {
				t.Errorf("%s: depends on %s, which is not a service", name, dep)
				continue
			}
			if !profiled && len(composeStrings(composeMap(d)["profiles"])) > 0 {
				t.Errorf("%s: starts without a profile but depends on %s, which needs one", name, dep)
			}
		}
		if b, ok := svc["build"]; ok {
			buildCtx, dockerfile := ".", "Dockerfile"
			if s, ok := b.(string); ok {
				buildCtx = s
			} else if m := composeMap(b); m != nil {
				if c, ok := m["context"].(string); ok {
					buildCtx = c
				}
				if d, ok := m["dockerfile"].(string); ok {
					dockerfile = d
				}
			}
			dir := filepath.Join(composeRoot, composeInterpolated(t, name, []string{buildCtx})[0])
			if st, err := os.Stat(dir); err != nil || !st.IsDir() {
				t.Errorf("%s: build context %s is not a directory", name, buildCtx)
			}
			if _, err := os.Stat(filepath.Join(dir, dockerfile)); err != nil {
				t.Errorf("%s: build dockerfile: %v", name, err)
			}
		} else {
			image, _ := svc["image"].(string)
			if !composePinned(image) {
				t.Errorf("%s: image %q is not pinned to a version", name, image)
			}
		}
		for _, m := range composeMounts(t, name, svc) {
			switch {
			case m.bind:
				if _, err := os.Stat(m.source); err != nil {
					t.Errorf("%s: mounts %s, which does not exist: %v", name, composeRel(m.source), err)
				}
			case m.source != "":
				if _, ok := volumes[m.source]; !ok {
					t.Errorf("%s: named volume %s is not declared under top-level volumes", name, m.source)
				}
			}
		}
		for _, p := range composeStrings(svc["ports"]) {
			parts := strings.Split(p, ":")
			if len(parts) < 2 {
				continue
			}
			hp := strings.Join(parts[:len(parts)-1], ":")
			if ip := composeInterpolated(t, name, []string{p})[0]; !strings.HasPrefix(ip, "127.0.0.1:") {
				t.Errorf("%s: port %s is published beyond loopback by default (%s), want 127.0.0.1 unless PUBLISH_ADDR says otherwise", name, p, ip)
			}
			if other, ok := hostPorts[hp]; ok {
				t.Errorf("%s: host port %s is published by %s too", name, hp, other)
			}
			hostPorts[hp] = name
		}
	}
}

// composePrometheusAgrees checks deploy/prometheus/prometheus.yml against
// the stack: its rule files exist where Prometheus looks for them, and its
// targets are services on ports they listen on.
func composePrometheusAgrees(t *testing.T, services map[string]any, mounts []composeMount, cfg, host string) {
	t.Helper()
	b, err := os.ReadFile(host)
	if err != nil {
		t.Fatalf("prometheus: its configuration %s: %v", cfg, err)
	}
	var conf struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(b, &conf); err != nil {
		t.Fatalf("%s: %v", composeRel(host), err)
	}
	for _, rf := range conf.RuleFiles {
		if !path.IsAbs(rf) {
			rf = path.Join(path.Dir(cfg), rf)
		}
		h, ok := composeHostPath(mounts, rf)
		if !ok {
			t.Errorf("prometheus: rule file %s is not inside a bind mount", rf)
			continue
		}
		if m, _ := filepath.Glob(h); len(m) == 0 {
			t.Errorf("prometheus: rule file %s (%s on the host) does not exist", rf, composeRel(h))
		}
	}
	scraped := map[string]bool{} // the services some job scrapes
	for _, sc := range conf.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			for _, target := range st.Targets {
				h, port, err := net.SplitHostPort(target)
				if err != nil {
					t.Errorf("prometheus: job %s: target %q: %v", sc.JobName, target, err)
					continue
				}
				if h == "localhost" || h == "127.0.0.1" {
					continue
				}
				svc, ok := services[h]
				if !ok {
					t.Errorf("prometheus: job %s scrapes %s, but there is no service %s", sc.JobName, target, h)
					continue
				}
				if !slices.Contains(composeContainerPorts(composeMap(svc)), port) {
					t.Errorf("prometheus: job %s scrapes %s, but %s listens on %v", sc.JobName, target, h, composeContainerPorts(composeMap(svc)))
				}
				scraped[h] = true
			}
		}
	}
	// Every service running sampled's image (sampled, sampled-ollama) is
	// scraped, whatever its profile.
	image := composeMap(services["sampled"])["image"]
	for name, svc := range services {
		if img := composeMap(svc)["image"]; image != nil && img == image && !scraped[name] {
			t.Errorf("%s: no job scrapes %s, which runs sampled (%v)", composeRel(host), name, img)
		}
	}
	if !scraped["sampled"] {
		t.Errorf("%s: no job scrapes sampled", composeRel(host))
	}
}

// composeGrafanaAgrees checks the Grafana provisioning files against the
// stack: data sources point at services, dashboard providers read mounted
// directories. Files not written yet are skipped.
func composeGrafanaAgrees(t *testing.T, services map[string]any, mounts []composeMount) {
	t.Helper()
	dir := filepath.Join(composeRoot, "deploy", "grafana", "provisioning")
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*.y*ml"))
	if len(files) == 0 {
		t.Skipf("no provisioning files in %s yet", composeRel(dir))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var prov struct {
			Datasources []struct {
				Name string `yaml:"name"`
				URL  string `yaml:"url"`
			} `yaml:"datasources"`
			Providers []struct {
				Name    string `yaml:"name"`
				Options struct {
					Path string `yaml:"path"`
				} `yaml:"options"`
			} `yaml:"providers"`
		}
		if err := yaml.Unmarshal(b, &prov); err != nil {
			t.Errorf("%s: %v", composeRel(f), err)
			continue
		}
		for _, ds := range prov.Datasources {
			u := strings.TrimPrefix(strings.TrimPrefix(ds.URL, "http://"), "https://")
			h, port, err := net.SplitHostPort(strings.SplitN(u, "/", 2)[0])
			if err != nil {
				t.Errorf("%s: data source %s: url %q has no host:port", composeRel(f), ds.Name, ds.URL)
				continue
			}
			svc, ok := services[h]
			if !ok {
				t.Errorf("%s: data source %s points at %s, which is not a service", composeRel(f), ds.Name, h)
				continue
			}
			if !slices.Contains(composeContainerPorts(composeMap(svc)), port) {
				t.Errorf("%s: data source %s uses port %s, but %s listens on %v", composeRel(f), ds.Name, port, h, composeContainerPorts(composeMap(svc)))
			}
		}
		for _, p := range prov.Providers {
			if p.Options.Path == "" {
				continue
			}
			h, ok := composeHostPath(mounts, p.Options.Path)
			if !ok {
				t.Errorf("%s: dashboard provider %s reads %s, which grafana does not mount", composeRel(f), p.Name, p.Options.Path)
				continue
			}
			if st, err := os.Stat(h); err != nil || !st.IsDir() {
				t.Errorf("%s: dashboard provider %s reads %s (%s on the host), not a directory", composeRel(f), p.Name, p.Options.Path, composeRel(h))
			}
		}
	}
}

// TestDockerfileBuild checks the Dockerfile's build stage: its `go build`
// lines build the service and the healthcheck static (CGO_ENABLED=0),
// stripped and trimmed, from a build context (what .dockerignore lets
// through) that holds every file they need. Then it builds the two
// packages here, with the ordinary build cache (a -trimpath build shares
// none with the tests' and took minutes), and runs them as the image
// would. It also checks the runtime stage: non-root user, healthcheck,
// entrypoint.
func TestDockerfileBuild(t *testing.T) {
	stages := dockerfileParse(t)
	if len(stages) < 2 {
		t.Fatalf("Dockerfile: %d stage(s), want a build stage and a runtime stage", len(stages))
	}
	build, final := stages[0], stages[len(stages)-1]

	t.Run("runtime stage", func(t *testing.T) {
		if !strings.HasPrefix(final.from, "gcr.io/distroless/static") || !strings.HasSuffix(final.from, ":nonroot") {
			t.Errorf("final stage FROM %s, want gcr.io/distroless/static-…:nonroot", final.from)
		}
		user := final.last("USER")
		if user == "" {
			t.Error("final stage: no USER; the image would run as root")
		} else if u := strings.SplitN(user, ":", 2)[0]; u == "root" || u == "0" {
			t.Errorf("final stage: USER %s is root", user)
		}
		if hc := final.last("HEALTHCHECK"); !strings.Contains(hc, `CMD ["/healthcheck"]`) {
			t.Errorf("final stage: HEALTHCHECK %q, want CMD [\"/healthcheck\"]", hc)
		}
		if ep := final.last("ENTRYPOINT"); ep != `["/sampled"]` {
			t.Errorf("final stage: ENTRYPOINT %s, want [\"/sampled\"]", ep)
		}
		if !slices.Contains(strings.Fields(final.last("EXPOSE")), "8080") {
			t.Error("final stage: does not EXPOSE 8080")
		}
		// The service's own default address is loopback, which a port
		// mapping cannot reach.
		if !slices.Contains(final.env(), "SAMPLED_ADDR=:8080") {
			t.Errorf("final stage: ENV %v, want SAMPLED_ADDR=:8080", final.env())
		}
	})

	t.Run("go version", func(t *testing.T) {
		// The builder's Go must satisfy go.mod's go line.
		gomod, err := os.ReadFile(filepath.Join(composeRoot, "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
		if m == nil {
			t.Fatal("go.mod: no go line")
		}
		image, tag, _ := strings.Cut(build.from, ":")
		v := string(m[1])
		if path.Base(image) != "golang" || tag != v && !strings.HasPrefix(tag, v+"-") && !strings.HasPrefix(tag, v+".") {
			t.Errorf("build stage FROM %s, want golang:%s (go.mod says go %s)", build.from, m[1], m[1])
		}
	})

	t.Run("module layer", func(t *testing.T) {
		// go.mod and go.sum alone, then go mod download, then the sources:
		// the download layer is rebuilt only when the modules change.
		var steps []string
		for _, in := range build.instrs {
			switch {
			case in.cmd == "COPY" && slices.Equal(strings.Fields(in.args), []string{"go.mod", "go.sum", "./"}):
				steps = append(steps, "copy modules")
			case in.cmd == "RUN" && strings.Contains(in.args, "go mod download"):
				steps = append(steps, "download")
			case in.cmd == "COPY" && strings.HasPrefix(in.args, ". "):
				steps = append(steps, "copy sources")
			case in.cmd == "RUN" && strings.Contains(in.args, "go build"):
				steps = append(steps, "build")
			}
		}
		steps = slices.Compact(steps)
		if want := []string{"copy modules", "download", "copy sources", "build"}; !slices.Equal(steps, want) {
			t.Errorf("build stage steps %q, want %q", steps, want)
		}
	})

	// The build context, as Docker would send it.
	ctxDir := t.TempDir()
	dockerignoreCopy(t, composeRoot, ctxDir)
	for _, must := range []string{"go.mod", "go.sum", "cmd/server/main.go", "cmd/healthcheck/main.go", "api/openapi.yaml"} {
		if _, err := os.Stat(filepath.Join(ctxDir, must)); err != nil {
			t.Errorf(".dockerignore keeps %s out of the build context", must)
		}
	}
	for _, mustNot := range []string{".git", "reference/openai", "docs"} {
		if _, err := os.Stat(filepath.Join(ctxDir, mustNot)); err == nil {
			t.Errorf(".dockerignore lets %s into the build context", mustNot)
		}
	}

	// The build context holds every package and embedded file the two
	// builds need.
	list := exec.Command("go", "list", "-deps", "./cmd/server", "./cmd/healthcheck")
	list.Dir = ctxDir
	if out, err := list.CombinedOutput(); err != nil {
		t.Errorf("go list in the build context: %v\n%s", err, out)
	}

	// The build lines: static, stripped, trimmed, each into /out.
	pkgs := map[string]string{} // path in the build stage -> package
	for _, run := range build.all("RUN") {
		script := dockerfileRunScript(run)
		if !strings.Contains(script, "go build") {
			continue
		}
		for _, flag := range []string{"CGO_ENABLED=0", "-trimpath", `-ldflags="-s -w"`} {
			if !strings.Contains(script, flag) {
				t.Errorf("Dockerfile: RUN %s: no %s", script, flag)
			}
		}
		f := strings.Fields(script)
		if i := slices.Index(f, "-o"); i >= 0 && i+1 < len(f) {
			pkgs[f[i+1]] = f[len(f)-1]
		}
	}
	// Binaries in the image, by their path there, built here.
	image := map[string]string{}
	for _, c := range final.all("COPY") {
		f := strings.Fields(c)
		if len(f) == 3 && (f[0] == "--from="+build.name || f[0] == "--from=0") {
			image[f[2]] = pkgs[f[1]]
		}
	}
	want := map[string]string{"/sampled": "./cmd/server", "/healthcheck": "./cmd/healthcheck"}
	if !maps.Equal(want, image) {
		t.Fatalf("the final stage copies %v (binary -> package of the build stage's go build -o), want %v", image, want)
	}
	bins := t.TempDir()
	for dst, pkg := range want {
		cmd := exec.Command("go", "build", "-o", filepath.Join(bins, dst), pkg)
		cmd.Dir = composeRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}

	t.Run("run", func(t *testing.T) {
		// The environment the container gets: the image's and compose's
		// (with every host variable unset), on a free port.
		senv := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + t.TempDir()}
		for k, v := range composeEnv(t, "sampled", composeService(t, composeMap(composeLoad(t)["services"]), "sampled")) {
			senv = append(senv, k+"="+v)
		}
		senv = append(senv, "SAMPLED_ADDR=127.0.0.1:0")
		dockerfileRun(t, filepath.Join(bins, "sampled"), filepath.Join(bins, "healthcheck"), senv)
	})
}

// dockerfileRun starts the service binary, probes it with the healthcheck
// binary, then stops it with SIGTERM as docker stop does.
func dockerfileRun(t *testing.T, server, probe string, env []string) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "stderr")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(server)
	cmd.Env = env
	cmd.Stderr = logFile
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	defer func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("sampled's stderr:\n%s", b)
		}
	}()
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				addrc <- a
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-exited:
		exited <- err
		t.Fatalf("sampled exited before listening: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("sampled did not print \"listening on\" within 30s")
	}
	base := "http://" + addr

	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"status":"ok"`)) {
		t.Errorf("GET /healthz: %d %s, want 200 {\"status\":\"ok\"}", resp.StatusCode, body)
	}

	_, port, _ := net.SplitHostPort(addr)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	// A server that accepts and never answers: the probe must give up.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	for _, c := range []struct {
		name string
		args []string
		env  []string
		ok   bool
	}{
		{"url argument", []string{base + "/healthz"}, nil, true},
		{"SAMPLED_ADDR of the container", nil, []string{"SAMPLED_ADDR=:" + port}, true},
		{"not found", []string{base + "/nope"}, nil, false},
		{"nobody listening", []string{"http://" + closedAddr + "/healthz"}, nil, false},
		{"no answer", []string{"http://" + silent.Addr().String() + "/healthz"}, nil, false},
		{"too many arguments", []string{base + "/healthz", "extra"}, nil, false},
	} {
		cmd := exec.Command(probe, c.args...)
		cmd.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin"}, c.env...) // not the test's SAMPLED_ADDR
		start := time.Now()
		out, err := cmd.CombinedOutput()
		took := time.Since(start)
		var exit *exec.ExitError
		switch {
		case c.ok && err != nil:
			t.Errorf("healthcheck (%s): %v\n%s", c.name, err, out)
		case !c.ok && !errors.As(err, &exit):
			t.Errorf("healthcheck (%s): %v, want exit status 1", c.name, err)
		case !c.ok && exit.ExitCode() != 1:
			t.Errorf("healthcheck (%s): exit status %d, want 1", c.name, exit.ExitCode())
		}
		if took > 5*time.Second {
			t.Errorf("healthcheck (%s) took %v, want at most its 2s timeout", c.name, took)
		}
	}

	// docker stop: SIGTERM to the entrypoint, which drains and exits 0.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Errorf("sampled after SIGTERM: %v, want exit status 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("sampled did not exit within 30s of SIGTERM")
	}
	logs, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := 0
	for line := range strings.SplitSeq(strings.TrimSpace(string(logs)), "\n") {
		if line == "" {
			continue
		}
		lines++
		if !json.Valid([]byte(line)) {
			t.Errorf("stderr line is not JSON (SAMPLED_LOG_FORMAT=json): %s", line)
		}
	}
	if lines == 0 {
		t.Error("sampled logged nothing to stderr")
	}
}

// dockerfileRunScript returns the shell command of a RUN instruction's
// arguments, without its options (--mount=…, --network=…).
func dockerfileRunScript(args string) string {
	s := strings.TrimSpace(args)
	for strings.HasPrefix(s, "--") {
		i := strings.IndexAny(s, " \t")
		if i < 0 {
			return ""
		}
		s = strings.TrimSpace(s[i:])
	}
	return s
}

// dockerfileInstr is one Dockerfile instruction, continuation lines joined.
type dockerfileInstr struct {
	cmd  string // upper case
	args string
}

// dockerfileStage is one FROM and the instructions that follow it.
type dockerfileStage struct {
	from, name string
	instrs     []dockerfileInstr
}

// all returns the arguments of every instruction cmd of the stage.
func (s dockerfileStage) all(cmd string) []string {
	var out []string
	for _, in := range s.instrs {
		if in.cmd == cmd {
			out = append(out, in.args)
		}
	}
	return out
}

// last returns the arguments of the stage's last instruction cmd, the one
// in force, or "".
func (s dockerfileStage) last(cmd string) string {
	all := s.all(cmd)
	if len(all) == 0 {
		return ""
	}
	return all[len(all)-1]
}

// env returns the stage's ENV variables as KEY=VALUE.
func (s dockerfileStage) env() []string {
	var out []string
	for _, e := range s.all("ENV") {
		if k, v, ok := strings.Cut(e, " "); ok && !strings.Contains(k, "=") {
			out = append(out, k+"="+strings.TrimSpace(v))
			continue
		}
		for _, kv := range strings.Fields(e) {
			out = append(out, strings.ReplaceAll(kv, `"`, ""))
		}
	}
	return out
}

// dockerfileParse reads the Dockerfile into stages.
func dockerfileParse(t *testing.T) []dockerfileStage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(composeRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var stages []dockerfileStage
	var cur strings.Builder
	flush := func() {
		line := strings.TrimSpace(cur.String())
		cur.Reset()
		if line == "" {
			return
		}
		cmd, args, _ := strings.Cut(line, " ")
		in := dockerfileInstr{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		if in.cmd == "FROM" {
			var f []string
			for _, w := range strings.Fields(in.args) {
				if !strings.HasPrefix(w, "--") {
					f = append(f, w)
				}
			}
			st := dockerfileStage{}
			if len(f) > 0 {
				st.from = f[0]
			}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
			}
			stages = append(stages, st)
			return
		}
		if len(stages) == 0 {
			return // ARG before the first FROM
		}
		stages[len(stages)-1].instrs = append(stages[len(stages)-1].instrs, in)
	}
	for raw := range strings.SplitSeq(string(b), "\n") {
		line := strings.TrimRight(raw, " \t\r")
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue // comments, also between continuation lines
		}
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(cont)
			cur.WriteString(" ")
			continue
		}
		cur.WriteString(line)
		flush()
	}
	flush()
	return stages
}

// dockerfileFinalCopies returns the destinations of the final stage's COPY
// instructions: the files the image is sure to contain.
func dockerfileFinalCopies(t *testing.T, stages []dockerfileStage) []string {
	t.Helper()
	if len(stages) == 0 {
		t.Fatal("Dockerfile: no stage")
	}
	var out []string
	for _, c := range stages[len(stages)-1].all("COPY") {
		if f := strings.Fields(c); len(f) > 1 {
			out = append(out, f[len(f)-1])
		}
	}
	return out
}

// dockerignoreCopy copies the files of the build context src into dst,
// leaving out what .dockerignore excludes, the way Docker's client does:
// patterns are matched against slash-separated paths relative to the
// context, `**` spans directories, a pattern that matches a directory
// excludes all of it, `!` re-includes and the last matching pattern wins.
func dockerignoreCopy(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(src, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	type rule struct {
		re     *regexp.Regexp
		negate bool
	}
	var rules []rule
	for raw := range strings.SplitSeq(string(b), "\n") {
		p := strings.TrimSpace(raw)
		if p == "" || strings.HasPrefix(p, "#") {
			continue
		}
		r := rule{}
		if p[0] == '!' {
			r.negate, p = true, strings.TrimSpace(p[1:])
		}
		p = strings.TrimPrefix(path.Clean(filepath.ToSlash(p)), "/")
		r.re = dockerignoreRegexp(p)
		rules = append(rules, r)
	}
	excluded := func(rel string) bool {
		out := false
		for _, r := range rules {
			// A pattern matches the path or one of its parent directories.
			for p := rel; p != "." && p != "/"; p = path.Dir(p) {
				if r.re.MatchString(p) {
					out = !r.negate
					break
				}
			}
		}
		return out
	}
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if excluded(rel) {
			// Docker re-includes `!` paths inside excluded directories; with
			// no `!` rule nothing below can come back.
			if d.IsDir() && !slices.ContainsFunc(rules, func(r rule) bool { return r.negate }) {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(l, target)
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			return os.WriteFile(target, data, info.Mode().Perm())
		}
		return nil
	})
	if err != nil {
		t.Fatalf("copying the build context: %v", err)
	}
}

// dockerignoreRegexp translates a .dockerignore pattern into a regular
// expression over the whole path, as Docker's pattern matcher does.
func dockerignoreRegexp(p string) *regexp.Regexp {
	var re strings.Builder
	re.WriteString("^")
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case '[':
			// A character class passes through up to its closing bracket.
			j := strings.IndexByte(p[i:], ']')
			if j < 0 {
				re.WriteString(regexp.QuoteMeta(p[i:]))
				i = len(p)
				continue
			}
			re.WriteString(p[i : i+j+1])
			i += j
			if i+1 < len(p) && p[i+1] == '*' {
				i++
				if i+1 < len(p) && p[i+1] == '/' {
					i++
				}
				if i+1 == len(p) {
					re.WriteString(".*")
				} else {
					re.WriteString("(.*/)?")
				}
			} else {
				re.WriteString("[^/]*")
			}
		case '?':
			re.WriteString("[^/]")
		case '\\':
			if i+1 < len(p) {
				i++
				re.WriteString(regexp.QuoteMeta(p[i : i+1]))
			}
		default:
			re.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	re.WriteString("$")
	return regexp.MustCompile(re.String())
}

// composeLoad reads docker-compose.yml into plain JSON values: maps with
// string keys, slices, strings, float64 numbers, booleans and nil.
func composeLoad(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(composeRoot, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var raw any
	if err := yaml.Unmarshal(b, &raw); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	doc, err := composeJSON(composeStringKeys(raw))
	if err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return doc
}

// composeStringKeys converts every mapping key to a string, as JSON needs.
func composeStringKeys(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = composeStringKeys(e)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[fmt.Sprint(k)] = composeStringKeys(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = composeStringKeys(e)
		}
		return out
	default:
		return v
	}
}

// composeJSON returns a deep copy of v made of JSON values, which is what
// the schema validator expects.
func composeJSON(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("top level: %w", err)
	}
	return out, nil
}

// composeSchema compiles the Compose specification's schema, offline.
func composeSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(composeRoot, "reference", "compose", "compose-spec.json"))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	// Everything the schema refers to is inside it: never fetch.
	delete(c.Loaders, "http")
	delete(c.Loaders, "https")
	schema, err := c.Compile(b)
	if err != nil {
		t.Fatalf("compose-spec.json: %v", err)
	}
	// It declares draft-07, whose keywords (definitions, dependencies, array
	// items) differ from the library's default 2020-12.
	if got := schema.Dialect(); got != jsonschema.Draft7 {
		t.Fatalf("compose-spec.json compiled as %s, want draft-07", got)
	}
	return schema
}

// composeSchemaErrors lists the root causes of a failed validation: the
// errors of the innermost failing evaluations, each at its full instance
// path (the list gives each location relative to its parent's).
func composeSchemaErrors(res *jsonschema.EvaluationResult) []string {
	var out []string
	var walk func(l jsonschema.List, at string)
	walk = func(l jsonschema.List, at string) {
		at += l.InstanceLocation
		inner := false
		for _, d := range l.Details {
			if !d.Valid {
				inner = true
				walk(d, at)
			}
		}
		if !inner {
			for kw, msg := range l.Errors {
				out = append(out, fmt.Sprintf("  %s: %s (%s)", composeOr(at, "/"), msg, kw))
			}
		}
	}
	walk(*res.ToList(), "")
	sort.Strings(out)
	return slices.Compact(out)
}

// composeOr returns s, or def when s is empty.
func composeOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// composeMap returns v as a mapping, or nil.
func composeMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// composeService returns the service name, failing the test without it.
func composeService(t *testing.T, services map[string]any, name string) map[string]any {
	t.Helper()
	svc := composeMap(services[name])
	if svc == nil {
		t.Fatalf("docker-compose.yml: no service %s", name)
	}
	return svc
}

// composeStrings returns a string or a list of scalars as strings.
func composeStrings(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			out = append(out, fmt.Sprint(e))
		}
		return out
	}
	return nil
}

// composeRawEnv returns a service's environment before interpolation;
// variables passed through from the host without a value are left out.
func composeRawEnv(t *testing.T, name string, svc map[string]any) map[string]string {
	t.Helper()
	out := map[string]string{}
	switch env := svc["environment"].(type) {
	case nil:
	case map[string]any:
		for k, v := range env {
			if v != nil {
				out[k] = fmt.Sprint(v)
			}
		}
	case []any:
		for _, e := range composeStrings(env) {
			if k, v, ok := strings.Cut(e, "="); ok {
				out[k] = v
			}
		}
	default:
		t.Fatalf("%s: environment is a %T", name, env)
	}
	return out
}

// composeEnv returns a service's environment as Compose sets it on a host
// where none of the variables it refers to is set.
func composeEnv(t *testing.T, name string, svc map[string]any) map[string]string {
	t.Helper()
	out := composeRawEnv(t, name, svc)
	for k, v := range out {
		out[k] = composeInterpolated(t, name, []string{v})[0]
	}
	return out
}

// composeVarRE matches Compose's interpolations: $$, ${VAR}, ${VAR:-default},
// ${VAR-default}, ${VAR:?error}, ${VAR?error} and $VAR.
var composeVarRE = regexp.MustCompile(`\$(?:\$|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))`)

// composeInterpolated interpolates each string as Compose does on a host
// where no variable is set: defaults apply, required variables fail.
func composeInterpolated(t *testing.T, name string, in []string) []string {
	t.Helper()
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = composeVarRE.ReplaceAllStringFunc(s, func(m string) string {
			sm := composeVarRE.FindStringSubmatch(m)
			switch {
			case m == "$$":
				return "$"
			case strings.HasSuffix(sm[2], "-"):
				return sm[3]
			case strings.HasSuffix(sm[2], "?"):
				t.Errorf("%s: %s requires a variable the host may not set", name, m)
			}
			return ""
		})
	}
	return out
}

// composeMount is one entry of a service's volumes.
type composeMount struct {
	source   string // host path (bind, joined to composeRoot) or volume name
	target   string
	bind     bool
	readOnly bool
}

// composeMounts returns a service's volumes, short or long syntax.
func composeMounts(t *testing.T, name string, svc map[string]any) []composeMount {
	t.Helper()
	var out []composeMount
	list, _ := svc["volumes"].([]any)
	for _, v := range list {
		var m composeMount
		switch v := v.(type) {
		case string:
			parts := strings.Split(composeInterpolated(t, name, []string{v})[0], ":")
			switch len(parts) {
			case 1:
				m.target = parts[0]
			default:
				m.source, m.target = parts[0], parts[1]
				if len(parts) > 2 {
					m.readOnly = slices.Contains(strings.Split(parts[2], ","), "ro")
				}
				m.bind = strings.HasPrefix(m.source, ".") || strings.HasPrefix(m.source, "/") || strings.HasPrefix(m.source, "~")
			}
		case map[string]any:
			m.source, _ = v["source"].(string)
			m.target, _ = v["target"].(string)
			m.bind = v["type"] == "bind"
			m.readOnly = v["read_only"] == true
			m.source = composeInterpolated(t, name, []string{m.source})[0]
		default:
			t.Fatalf("%s: volumes entry %v is a %T", name, v, v)
		}
		if m.bind {
			if strings.HasPrefix(m.source, "~") {
				t.Errorf("%s: mounts %s from the home directory, outside the repository", name, m.source)
			} else if !filepath.IsAbs(m.source) {
				m.source = filepath.Join(composeRoot, m.source)
			}
		}
		out = append(out, m)
	}
	return out
}

// composeHasBind reports whether mounts binds the repository path rel at
// target, read-only.
func composeHasBind(mounts []composeMount, rel, target string) bool {
	return slices.ContainsFunc(mounts, func(m composeMount) bool {
		return m.bind && m.readOnly && m.source == filepath.Join(composeRoot, rel) && path.Clean(m.target) == target
	})
}

// composeHostPath maps a path in the container to the host file that a
// bind mount puts there, preferring the deepest mount.
func composeHostPath(mounts []composeMount, p string) (string, bool) {
	best, host := "", ""
	for _, m := range mounts {
		t := path.Clean(m.target)
		if !m.bind || len(t) <= len(best) {
			continue
		}
		if rest, ok := strings.CutPrefix(p, t); ok && (rest == "" || strings.HasPrefix(rest, "/")) {
			best, host = t, filepath.Join(m.source, filepath.FromSlash(rest))
		}
	}
	return host, best != ""
}

// composeUnder reports whether p is dir or inside it.
func composeUnder(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// composeRel shows a host path relative to the repository root.
func composeRel(p string) string {
	if rel, err := filepath.Rel(composeRoot, p); err == nil {
		return rel
	}
	return p
}

// composeDependsOn returns a service's dependencies and their conditions.
func composeDependsOn(svc map[string]any) map[string]string {
	out := map[string]string{}
	switch d := svc["depends_on"].(type) {
	case []any:
		for _, n := range composeStrings(d) {
			out[n] = "service_started"
		}
	case map[string]any:
		for n, c := range d {
			cond, _ := composeMap(c)["condition"].(string)
			out[n] = composeOr(cond, "service_started")
		}
	}
	return out
}

// composeContainerPorts returns the ports a service listens on inside its
// container, from its ports and expose entries.
func composeContainerPorts(svc map[string]any) []string {
	var out []string
	list, _ := svc["ports"].([]any)
	for _, p := range list {
		switch p := p.(type) {
		case string:
			parts := strings.Split(strings.SplitN(p, "/", 2)[0], ":")
			out = append(out, parts[len(parts)-1])
		case map[string]any:
			out = append(out, fmt.Sprint(p["target"]))
		}
	}
	out = append(out, composeStrings(svc["expose"])...)
	return out
}

// composePinned reports whether an image reference names a version: a tag
// other than latest, or a digest.
func composePinned(image string) bool {
	if strings.Contains(image, "@sha256:") {
		return true
	}
	i := strings.LastIndex(image, ":")
	if i < 0 || strings.Contains(image[i:], "/") {
		return false
	}
	tag := image[i+1:]
	return tag != "" && tag != "latest" && regexp.MustCompile(`\d`).MatchString(tag)
}

// composeEqual reports whether two JSON values are equal.
func composeEqual(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}
