// Package deploytest checks the operations files against the code: the
// Prometheus configuration and alert rules in deploy/prometheus, the Grafana
// provisioning and dashboard in deploy/grafana, and docs/metrics.md. Every
// metric name they use must be one that internal/metrics exports.
package deploytest

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/sampled/sampled/internal/metrics"
)

// deployRoot is the repository root, seen from this package's directory
// (where go test runs the tests).
const deployRoot = "../.."

var (
	deployPromConfig       = filepath.Join(deployRoot, "deploy/prometheus/prometheus.yml")
	deployAlertRules       = filepath.Join(deployRoot, "deploy/prometheus/alerts.yml")
	deployAlertTests       = filepath.Join(deployRoot, "deploy/prometheus/alerts_test.yml")
	deployDashboardFile    = filepath.Join(deployRoot, "deploy/grafana/dashboards/sampled.json")
	deployDatasourceFile   = filepath.Join(deployRoot, "deploy/grafana/provisioning/datasources/prometheus.yml")
	deployDashProviderFile = filepath.Join(deployRoot, "deploy/grafana/provisioning/dashboards/sampled.yml")
	deployMetricsDoc       = filepath.Join(deployRoot, "docs/metrics.md")
)

// deployRequiredAlerts are the alerts operations rely on; more may exist.
var deployRequiredAlerts = []string{
	"SampledValidationFailureRatioHigh",
	"SampledUpstreamErrorRatioHigh",
	"SampledLatencyP99High",
	"SampledValidationExhausted",
	"SampledDown",
}

// deployMetricRef matches a sampled metric name in an expression or a document.
var deployMetricRef = regexp.MustCompile(`\bsampled_[a-z_]+`)

// deployFQName reads the metric name out of a prometheus.Desc's String form.
var deployFQName = regexp.MustCompile(`fqName: "([^"]+)"`)

// Metric kinds of the catalogue.
const (
	deployKindCounter   = "counter"
	deployKindGauge     = "gauge"
	deployKindHistogram = "histogram"
	deployKindSummary   = "summary"
)

// deployKindOf maps the declared type of a metrics.Metrics field to a metric kind.
var deployKindOf = map[reflect.Type]string{
	reflect.TypeFor[prometheus.Counter]():       deployKindCounter,
	reflect.TypeFor[*prometheus.CounterVec]():   deployKindCounter,
	reflect.TypeFor[prometheus.Gauge]():         deployKindGauge,
	reflect.TypeFor[*prometheus.GaugeVec]():     deployKindGauge,
	reflect.TypeFor[prometheus.GaugeFunc]():     deployKindGauge,
	reflect.TypeFor[prometheus.Histogram]():     deployKindHistogram,
	reflect.TypeFor[*prometheus.HistogramVec](): deployKindHistogram,
	reflect.TypeFor[prometheus.Summary]():       deployKindSummary,
	reflect.TypeFor[*prometheus.SummaryVec]():   deployKindSummary,
}

// deployCatalogue returns every metric sampled defines, name to kind. It reads
// the fields of metrics.Metrics and metrics.Redis (registered when runs are
// kept in Redis) and checks them against what metrics.New and
// metrics.NewRedis register, so that neither can drift from the other
// unnoticed.
func deployCatalogue(t *testing.T) map[string]string {
	t.Helper()
	reg := prometheus.NewRegistry()
	sets := []any{metrics.New(reg), metrics.NewRedis(reg)}

	kinds := map[string]string{}
	for _, m := range sets {
		v := reflect.ValueOf(m).Elem()
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			c, ok := v.Field(i).Interface().(prometheus.Collector)
			if !ok {
				continue
			}
			kind, ok := deployKindOf[f.Type]
			if !ok {
				t.Fatalf("%s.%s has type %s, unknown to this test: add it to deployKindOf", v.Type(), f.Name, f.Type)
			}
			for _, name := range deployDescribe(t, c) {
				kinds[name] = kind
			}
		}
	}

	registered := deployDescribe(t, reg)
	names := slices.Sorted(maps.Keys(kinds))
	if !slices.Equal(names, registered) {
		t.Fatalf("metrics.Metrics and metrics.Redis fields define %v but metrics.New and metrics.NewRedis register %v", names, registered)
	}
	if len(names) == 0 {
		t.Fatal("the metric catalogue is empty")
	}
	for _, name := range names {
		if !strings.HasPrefix(name, "sampled_") {
			t.Errorf("metric %s: want the sampled_ prefix", name)
		}
	}
	return kinds
}

// deployDescribe returns the sorted metric names a collector describes.
func deployDescribe(t *testing.T, c prometheus.Collector) []string {
	t.Helper()
	ch := make(chan *prometheus.Desc)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	var descs []*prometheus.Desc
	for d := range ch {
		descs = append(descs, d)
	}
	var names []string
	for _, d := range descs {
		m := deployFQName.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read the metric name of %s", d)
		}
		names = append(names, m[1])
	}
	sort.Strings(names)
	return slices.Compact(names)
}

// deployCheckRefs reports every sampled_* name in expr that is not a series sampled
// exports: a counter or gauge by its name, a histogram by its _bucket,
// _count or _sum series, a summary by its name, _count or _sum. With
// baseNames, a histogram's own name is accepted too (as prose uses it).
func deployCheckRefs(kinds map[string]string, expr string, baseNames bool) []string {
	var bad []string
	for _, ref := range deployMetricRef.FindAllString(expr, -1) {
		if err := deployResolve(kinds, ref, baseNames); err != nil {
			bad = append(bad, err.Error())
		}
	}
	return bad
}

func deployResolve(kinds map[string]string, ref string, baseNames bool) error {
	if kind, ok := kinds[ref]; ok {
		if kind == deployKindHistogram && !baseNames {
			return fmt.Errorf("%s is a histogram: use %[1]s_bucket, %[1]s_count or %[1]s_sum", ref)
		}
		return nil
	}
	for _, suffix := range []string{"_bucket", "_count", "_sum"} {
		base, ok := strings.CutSuffix(ref, suffix)
		if !ok {
			continue
		}
		switch kinds[base] {
		case deployKindHistogram:
			return nil
		case deployKindSummary:
			if suffix != "_bucket" {
				return nil
			}
		}
	}
	return fmt.Errorf("%s is not a metric sampled exports (internal/metrics)", ref)
}

func deployReadFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func deployReadYAML(t *testing.T, path string, v any) {
	t.Helper()
	if err := yaml.Unmarshal(deployReadFile(t, path), v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// deployPromtoolPath returns promtool's path. Without promtool the test is
// skipped, except in CI (CI=true), where a missing promtool is a failure.
func deployPromtoolPath(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("promtool is not on PATH (%v): CI must install it (apt-get install prometheus)", err)
		}
		t.Skipf("promtool is not on PATH (%v): install it (apt-get install prometheus, or a release from prometheus.io) to check deploy/prometheus", err)
	}
	return path
}

func deployRunPromtool(t *testing.T, promtool string, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), promtool, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		return
	}
	t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
}

func TestPromtool(t *testing.T) {
	promtool := deployPromtoolPath(t)
	t.Run("check config", func(t *testing.T) {
		deployRunPromtool(t, promtool, "check", "config", deployPromConfig)
	})
	t.Run("check rules", func(t *testing.T) {
		deployRunPromtool(t, promtool, "check", "rules", deployAlertRules)
	})
	t.Run("test rules", func(t *testing.T) {
		deployRunPromtool(t, promtool, "test", "rules", deployAlertTests)
	})
	t.Run("dashboard expressions parse", func(t *testing.T) {
		// promtool has no "check this expression"; it parses every rule's
		// expression, so each dashboard query becomes a recording rule.
		d := deployLoadDashboard(t)
		type recordingRule struct {
			Record string `yaml:"record"`
			Expr   string `yaml:"expr"`
		}
		var rules []recordingRule
		for _, q := range deployDashboardQueries(t, d) {
			rules = append(rules, recordingRule{Record: fmt.Sprintf("dashboard:query:%d", len(rules)), Expr: deployGrafanaToPromQL(q.expr)})
		}
		file := map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}}
		b, err := yaml.Marshal(file)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "dashboard_rules.yml")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		deployRunPromtool(t, promtool, "check", "rules", path)
	})
}

// deployGrafanaToPromQL replaces the dashboard's variables by values Prometheus
// accepts: every provider and model, and a fixed rate interval.
func deployGrafanaToPromQL(expr string) string {
	return strings.NewReplacer(
		"$__rate_interval", "1m",
		"${provider}", ".*",
		"${model}", ".*",
		"$provider", ".*",
		"$model", ".*",
	).Replace(expr)
}

type deployDashboard struct {
	UID        string        `json:"uid"`
	Title      string        `json:"title"`
	Panels     []deployPanel `json:"panels"`
	Templating struct {
		List []deployVariable `json:"list"`
	} `json:"templating"`
}

type deployPanel struct {
	ID         int               `json:"id"`
	Type       string            `json:"type"`
	Title      string            `json:"title"`
	Datasource *deployDatasource `json:"datasource"`
	Targets    []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []deployPanel `json:"panels"` // of a collapsed row
}

type deployDatasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type deployVariable struct {
	Name       string            `json:"name"`
	Type       string            `json:"type"`
	Query      json.RawMessage   `json:"query"`
	Datasource *deployDatasource `json:"datasource"`
	Multi      bool              `json:"multi"`
	IncludeAll bool              `json:"includeAll"`
	AllValue   string            `json:"allValue"`
}

// queryText returns the variable's query: a string, or (newer Grafana) an
// object with a query member.
func (v deployVariable) queryText() (string, error) {
	var s string
	if err := json.Unmarshal(v.Query, &s); err == nil {
		return s, nil
	}
	var o struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal(v.Query, &o); err != nil {
		return "", fmt.Errorf("variable %s: query is neither a string nor an object: %w", v.Name, err)
	}
	return o.Query, nil
}

func deployLoadDashboard(t *testing.T) *deployDashboard {
	t.Helper()
	var d deployDashboard
	if err := json.Unmarshal(deployReadFile(t, deployDashboardFile), &d); err != nil {
		t.Fatalf("%s: %v", deployDashboardFile, err)
	}
	return &d
}

// deployAllPanels flattens rows.
func deployAllPanels(ps []deployPanel) []deployPanel {
	var out []deployPanel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, deployAllPanels(p.Panels)...)
	}
	return out
}

type deployQuery struct {
	where string // for messages
	expr  string // PromQL with Grafana variables
}

// deployLabelValues matches a Grafana label_values(selector, label) query.
var deployLabelValues = regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// deployDashboardQueries returns every PromQL expression of the dashboard: panel
// targets and the metric selectors of query variables.
func deployDashboardQueries(t *testing.T, d *deployDashboard) []deployQuery {
	t.Helper()
	var qs []deployQuery
	for _, p := range deployAllPanels(d.Panels) {
		for _, tg := range p.Targets {
			qs = append(qs, deployQuery{where: fmt.Sprintf("panel %q target %s", p.Title, tg.RefID), expr: tg.Expr})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, err := v.queryText()
		if err != nil {
			t.Fatal(err)
		}
		m := deployLabelValues.FindStringSubmatch(strings.TrimSpace(q))
		if m == nil {
			t.Errorf("variable %s: query %q: want label_values(selector, label)", v.Name, q)
			continue
		}
		qs = append(qs, deployQuery{where: "variable " + v.Name, expr: m[1]})
	}
	return qs
}

// deployGrafanaVar matches a Grafana variable reference: $name or ${name...}.
var deployGrafanaVar = regexp.MustCompile(`\$(?:\{([a-zA-Z0-9_]+)[^}]*\}|([a-zA-Z0-9_]+))`)

func TestDashboard(t *testing.T) {
	kinds := deployCatalogue(t)
	d := deployLoadDashboard(t)

	if d.UID != "sampled" {
		t.Errorf("uid = %q, want sampled", d.UID)
	}
	if d.Title != "sampled" {
		t.Errorf("title = %q, want sampled", d.Title)
	}

	t.Run("variables", func(t *testing.T) {
		vars := map[string]deployVariable{}
		for _, v := range d.Templating.List {
			vars[v.Name] = v
		}
		for _, name := range []string{"provider", "model"} {
			v, ok := vars[name]
			if !ok {
				t.Errorf("no template variable %s", name)
				continue
			}
			if v.Type != "query" || !v.Multi || !v.IncludeAll {
				t.Errorf("variable %s: type %q multi %v includeAll %v, want a multi-value query variable with All", name, v.Type, v.Multi, v.IncludeAll)
			}
			if v.AllValue != ".*" {
				t.Errorf("variable %s: allValue %q, want .* (so that All also matches values outside the list, such as other)", name, v.AllValue)
			}
			if v.Datasource == nil || v.Datasource.UID != "prometheus" {
				t.Errorf("variable %s: datasource %+v, want uid prometheus", name, v.Datasource)
			}
			q, err := v.queryText()
			if err != nil {
				t.Error(err)
				continue
			}
			if m := deployLabelValues.FindStringSubmatch(strings.TrimSpace(q)); m == nil || m[2] != name {
				t.Errorf("variable %s: query %q, want label_values(..., %s)", name, q, name)
			}
		}
	})

	t.Run("panels", func(t *testing.T) {
		ids := map[int]string{}
		for _, p := range deployAllPanels(d.Panels) {
			if strings.TrimSpace(p.Title) == "" {
				t.Errorf("panel %d (%s) has no title", p.ID, p.Type)
			}
			if prev, ok := ids[p.ID]; ok {
				t.Errorf("panels %q and %q share id %d", prev, p.Title, p.ID)
			}
			ids[p.ID] = p.Title
			if p.Type == "row" {
				continue
			}
			if p.Datasource == nil || p.Datasource.UID != "prometheus" {
				t.Errorf("panel %q: datasource %+v, want uid prometheus", p.Title, p.Datasource)
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no targets", p.Title)
			}
			refIDs := map[string]bool{}
			for _, tg := range p.Targets {
				if strings.TrimSpace(tg.Expr) == "" {
					t.Errorf("panel %q target %s has an empty expr", p.Title, tg.RefID)
				}
				if tg.RefID == "" || refIDs[tg.RefID] {
					t.Errorf("panel %q: refId %q empty or repeated", p.Title, tg.RefID)
				}
				refIDs[tg.RefID] = true
			}
		}
	})

	t.Run("metrics and variables in queries", func(t *testing.T) {
		used := map[string]bool{}
		for _, q := range deployDashboardQueries(t, d) {
			for _, bad := range deployCheckRefs(kinds, q.expr, false) {
				t.Errorf("%s: %s", q.where, bad)
			}
			for _, ref := range deployMetricRef.FindAllString(q.expr, -1) {
				for _, suffix := range []string{"_bucket", "_count", "_sum"} {
					if base, ok := strings.CutSuffix(ref, suffix); ok && kinds[base] != "" {
						ref = base
					}
				}
				used[ref] = true
			}
			// Only these variables: a test that runs the queries against a
			// real Prometheus substitutes them.
			for _, m := range deployGrafanaVar.FindAllStringSubmatch(q.expr, -1) {
				name := m[1] + m[2]
				if name != "provider" && name != "model" && name != "__rate_interval" {
					t.Errorf("%s: variable $%s; want only $provider, $model and $__rate_interval", q.where, name)
				}
			}
		}
		for name := range kinds {
			if !used[name] {
				t.Errorf("metric %s is on no panel", name)
			}
		}
	})

	t.Run("alert expressions", func(t *testing.T) {
		for _, r := range deployLoadAlerts(t) {
			for _, bad := range deployCheckRefs(kinds, r.Expr, false) {
				t.Errorf("alert %s: %s", r.Alert, bad)
			}
		}
	})
}

type deployRule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// deployLoadAlerts returns the rules of alerts.yml's group sampled.
func deployLoadAlerts(t *testing.T) []deployRule {
	t.Helper()
	var f struct {
		Groups []struct {
			Name  string       `yaml:"name"`
			Rules []deployRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	deployReadYAML(t, deployAlertRules, &f)
	for _, g := range f.Groups {
		if g.Name == "sampled" {
			return g.Rules
		}
	}
	t.Fatalf("%s: no group sampled", deployAlertRules)
	return nil
}

func TestAlertRules(t *testing.T) {
	rules := deployLoadAlerts(t)
	byName := map[string]deployRule{}
	for _, r := range rules {
		if r.Alert == "" {
			continue
		}
		if _, dup := byName[r.Alert]; dup {
			t.Errorf("alert %s defined twice", r.Alert)
		}
		byName[r.Alert] = r
		if r.For == "" {
			t.Errorf("alert %s: no for", r.Alert)
		}
		if s := r.Labels["severity"]; s != "warning" && s != "critical" {
			t.Errorf("alert %s: severity %q, want warning or critical", r.Alert, s)
		}
		for _, a := range []string{"summary", "description"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("alert %s: no %s annotation", r.Alert, a)
			}
		}
	}
	for _, name := range deployRequiredAlerts {
		if _, ok := byName[name]; !ok {
			t.Errorf("alert %s is missing", name)
		}
	}
	if s := byName["SampledDown"].Labels["severity"]; s != "critical" {
		t.Errorf("SampledDown: severity %q, want critical", s)
	}

	// Every alert has a unit test where it fires and one where it does not.
	var tests struct {
		RuleFiles []string `yaml:"rule_files"`
		Tests     []struct {
			AlertRuleTest []struct {
				EvalTime  string `yaml:"eval_time"`
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	deployReadYAML(t, deployAlertTests, &tests)
	if !slices.Contains(tests.RuleFiles, "alerts.yml") {
		t.Errorf("%s: rule_files %v, want alerts.yml", deployAlertTests, tests.RuleFiles)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if _, ok := byName[a.Alertname]; !ok {
				t.Errorf("%s: alert_rule_test for unknown alert %q", deployAlertTests, a.Alertname)
			}
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	for name := range byName {
		if !fires[name] {
			t.Errorf("%s: no case where %s fires", deployAlertTests, name)
		}
		if !quiet[name] {
			t.Errorf("%s: no case where %s does not fire (empty exp_alerts)", deployAlertTests, name)
		}
	}
}

func TestPrometheusConfig(t *testing.T) {
	var c struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName        string `yaml:"job_name"`
			ScrapeInterval string `yaml:"scrape_interval"`
			MetricsPath    string `yaml:"metrics_path"`
			StaticConfigs  []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
		Global struct {
			ScrapeInterval string `yaml:"scrape_interval"`
		} `yaml:"global"`
	}
	deployReadYAML(t, deployPromConfig, &c)
	if !slices.Contains(c.RuleFiles, "alerts.yml") {
		t.Errorf("rule_files = %v, want alerts.yml", c.RuleFiles)
	}
	found := false
	for _, sc := range c.ScrapeConfigs {
		if sc.JobName != "sampled" {
			continue
		}
		found = true
		interval := sc.ScrapeInterval
		if interval == "" {
			interval = c.Global.ScrapeInterval
		}
		if interval != "15s" {
			t.Errorf("job sampled: scrape_interval %q, want 15s", interval)
		}
		if sc.MetricsPath != "" && sc.MetricsPath != "/metrics" {
			t.Errorf("job sampled: metrics_path %q, want /metrics", sc.MetricsPath)
		}
		var targets []string
		for _, s := range sc.StaticConfigs {
			targets = append(targets, s.Targets...)
		}
		if !slices.Contains(targets, "sampled:8080") {
			t.Errorf("job sampled: targets %v, want sampled:8080", targets)
		}
	}
	if !found {
		t.Error("no scrape config with job_name sampled")
	}
}

func TestGrafanaProvisioning(t *testing.T) {
	var ds struct {
		Datasources []struct {
			UID       string `yaml:"uid"`
			Type      string `yaml:"type"`
			URL       string `yaml:"url"`
			IsDefault bool   `yaml:"isDefault"`
		} `yaml:"datasources"`
	}
	deployReadYAML(t, deployDatasourceFile, &ds)
	if len(ds.Datasources) != 1 {
		t.Fatalf("%s: %d data sources, want 1", deployDatasourceFile, len(ds.Datasources))
	}
	got := ds.Datasources[0]
	if got.UID != "prometheus" || got.Type != "prometheus" || got.URL != "http://prometheus:9090" || !got.IsDefault {
		t.Errorf("%s: data source %+v, want the default prometheus data source, uid prometheus, at http://prometheus:9090", deployDatasourceFile, got)
	}

	var dp struct {
		Providers []struct {
			Type    string `yaml:"type"`
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	// The tracing profile's Jaeger is the other data source.
	var jds struct {
		Datasources []struct {
			UID  string `yaml:"uid"`
			Type string `yaml:"type"`
			URL  string `yaml:"url"`
		} `yaml:"datasources"`
	}
	deployReadYAML(t, filepath.Join(filepath.Dir(deployDatasourceFile), "jaeger.yml"), &jds)
	if len(jds.Datasources) != 1 || jds.Datasources[0].UID != "jaeger" || jds.Datasources[0].Type != "jaeger" ||
		jds.Datasources[0].URL != "http://jaeger:16686" {
		t.Errorf("jaeger.yml: data sources %+v, want one jaeger data source, uid jaeger, at http://jaeger:16686", jds.Datasources)
	}

	deployReadYAML(t, deployDashProviderFile, &dp)
	if len(dp.Providers) != 1 || dp.Providers[0].Type != "file" || dp.Providers[0].Options.Path != "/var/lib/grafana/dashboards" {
		t.Errorf("%s: providers %+v, want one file provider reading /var/lib/grafana/dashboards", deployDashProviderFile, dp.Providers)
	}
}

func TestMetricsDocCoversCatalogue(t *testing.T) {
	kinds := deployCatalogue(t)
	doc := string(deployReadFile(t, deployMetricsDoc))
	mentioned := map[string]bool{}
	for _, ref := range deployMetricRef.FindAllString(doc, -1) {
		mentioned[ref] = true
	}
	for name := range kinds {
		if !mentioned[name] {
			t.Errorf("%s does not mention %s", deployMetricsDoc, name)
		}
	}
	for _, bad := range deployCheckRefs(kinds, doc, true) {
		t.Errorf("%s: %s", deployMetricsDoc, bad)
	}
	for _, r := range deployLoadAlerts(t) {
		if r.Alert != "" && !strings.Contains(doc, r.Alert) {
			t.Errorf("%s does not describe alert %s", deployMetricsDoc, r.Alert)
		}
	}
}
