// A Helm chart renderer for offline tests: Helm itself is not packaged for the build machines,
// but what a chart is made of is: Go's text/template, Sprig's functions (Debian's
// golang-github-masterminds-sprig-dev) and a YAML library. This renders a chart the way
// `helm template` does, closely enough to test podscope's chart:
//   - values: values.yaml deep-merged with each -f file in order (a null deletes a key), then
//     checked against values.schema.json (JSON Schema draft 7, as Helm does);
//   - .Values, .Release (Name, Namespace, Service, IsInstall, IsUpgrade, Revision), .Chart (the
//     Chart.yaml fields, capitalised as Helm does), .Files (Get, GetBytes), .Template (Name,
//     BasePath), .Capabilities (KubeVersion, APIVersions.Has);
//   - functions: Sprig's (without env and expandenv, as in Helm), include, tpl, required, fail,
//     toYaml, fromYaml, toJson, fromJson, lookup (always empty, as in `helm template`);
//   - every file of templates/ not starting with "_" is rendered; NOTES.txt separately.
// Stricter than Helm on purpose: a missing map key is an error, not "<no value>".
// Not covered (README, "Helm chart"): subcharts and dependencies, hooks, .Files.Glob/AsConfig,
// the Capabilities of a real cluster, chart packaging, and the Kubernetes API's own validation.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/template"

	sprig "github.com/Masterminds/sprig"
	"github.com/xeipuuv/gojsonschema"
	yaml "gopkg.in/yaml.v3"
)

// Chart is a chart directory read into memory.
type Chart struct {
	Dir       string
	Meta      map[string]interface{}
	Values    map[string]interface{}
	Schema    []byte
	Templates map[string]string // "templates/x.yaml" -> text
	Files     map[string][]byte // every other file, by its path in the chart
}

// Release is what `helm install NAME -n NAMESPACE` sets.
type Release struct {
	Name      string
	Namespace string
}

// LoadChart reads dir (symbolic links followed, as `helm package` does).
func LoadChart(dir string) (*Chart, error) {
	c := &Chart{Dir: dir, Templates: map[string]string{}, Files: map[string][]byte{}}
	meta, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		return nil, err
	}
	if err := yaml.Unmarshal(meta, &c.Meta); err != nil {
		return nil, fmt.Errorf("Chart.yaml: %v", err)
	}
	values, err := os.ReadFile(filepath.Join(dir, "values.yaml"))
	if err != nil {
		return nil, err
	}
	if c.Values, err = parseValues(values, "values.yaml"); err != nil {
		return nil, err
	}
	if c.Schema, err = os.ReadFile(filepath.Join(dir, "values.schema.json")); err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	var walk func(rel string) error
	walk = func(rel string) error {
		entries, err := os.ReadDir(filepath.Join(dir, rel))
		if err != nil {
			return err
		}
		for _, e := range entries {
			path := filepath.ToSlash(filepath.Join(rel, e.Name()))
			info, err := os.Stat(filepath.Join(dir, path)) // follows links
			if err != nil {
				return fmt.Errorf("%s: %v", path, err)
			}
			if info.IsDir() {
				if err := walk(path); err != nil {
					return err
				}
				continue
			}
			data, err := os.ReadFile(filepath.Join(dir, path))
			if err != nil {
				return err
			}
			if strings.HasPrefix(path, "templates/") {
				c.Templates[path] = string(data)
			} else {
				c.Files[path] = data
			}
		}
		return nil
	}
	return c, walk(".")
}

func parseValues(data []byte, origin string) (map[string]interface{}, error) {
	values := map[string]interface{}{}
	if err := yaml.Unmarshal(data, &values); err != nil {
		return nil, fmt.Errorf("%s: %v", origin, err)
	}
	return values, nil
}

// ReadValuesFile reads a -f file.
func ReadValuesFile(path string) (map[string]interface{}, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseValues(data, path)
}

// mergeValues merges src onto dst as Helm coalesces -f files: maps recursively, anything else
// replaced, a null deleting the key.
func mergeValues(dst, src map[string]interface{}) {
	for k, v := range src {
		if v == nil {
			delete(dst, k)
			continue
		}
		if sm, ok := v.(map[string]interface{}); ok {
			if dm, ok := dst[k].(map[string]interface{}); ok {
				mergeValues(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
}

func deepCopy(v interface{}) interface{} {
	switch t := v.(type) {
	case map[string]interface{}:
		out := make(map[string]interface{}, len(t))
		for k, e := range t {
			out[k] = deepCopy(e)
		}
		return out
	case []interface{}:
		out := make([]interface{}, len(t))
		for i, e := range t {
			out[i] = deepCopy(e)
		}
		return out
	default:
		return v
	}
}

// ValidateValues checks values against the chart's schema; the error lists every violation.
func (c *Chart) ValidateValues(values map[string]interface{}) error {
	if len(c.Schema) == 0 {
		return nil
	}
	doc, err := json.Marshal(values)
	if err != nil {
		return err
	}
	result, err := gojsonschema.Validate(gojsonschema.NewBytesLoader(c.Schema), gojsonschema.NewBytesLoader(doc))
	if err != nil {
		return fmt.Errorf("values.schema.json: %v", err)
	}
	if result.Valid() {
		return nil
	}
	var problems []string
	for _, e := range result.Errors() {
		problems = append(problems, e.String())
	}
	sort.Strings(problems)
	return fmt.Errorf("values don't meet the specifications of the schema:\n- %s", strings.Join(problems, "\n- "))
}

type files map[string][]byte

func (f files) Get(name string) string        { return string(f[name]) }
func (f files) GetBytes(name string) []byte    { return f[name] }

type apiVersions []string

func (a apiVersions) Has(v string) bool {
	for _, x := range a {
		if x == v {
			return true
		}
	}
	return false
}

func toYAML(v interface{}) string {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return ""
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// Render renders every template and NOTES.txt with values.yaml and the overrides in order.
// The result maps "templates/x.yaml" to its text.
func (c *Chart) Render(release Release, overrides ...map[string]interface{}) (map[string]string, error) {
	values := deepCopy(c.Values).(map[string]interface{})
	for _, o := range overrides {
		mergeValues(values, deepCopy(o).(map[string]interface{}))
	}
	if err := c.ValidateValues(values); err != nil {
		return nil, err
	}
	name, _ := c.Meta["name"].(string)
	chart := map[string]interface{}{}
	for k, v := range c.Meta {
		chart[strings.ToUpper(k[:1])+k[1:]] = v
	}
	top := map[string]interface{}{
		"Values":  values,
		"Chart":   chart,
		"Files":   files(c.Files),
		"Release": map[string]interface{}{"Name": release.Name, "Namespace": release.Namespace, "Service": "Helm", "IsInstall": true, "IsUpgrade": false, "Revision": 1},
		"Capabilities": map[string]interface{}{
			"KubeVersion": map[string]interface{}{"Version": "v1.29.0", "Major": "1", "Minor": "29"},
			"APIVersions": apiVersions{"v1", "apps/v1", "policy/v1", "networking.k8s.io/v1", "monitoring.coreos.com/v1"},
		},
	}

	root := template.New("chart").Option("missingkey=error")
	funcs := sprig.TxtFuncMap()
	delete(funcs, "env")
	delete(funcs, "expandenv")
	includeDepth := 0
	funcs["include"] = func(name string, data interface{}) (string, error) {
		if includeDepth > 100 {
			return "", fmt.Errorf("include %q: nested too deep", name)
		}
		includeDepth++
		defer func() { includeDepth-- }()
		var buf bytes.Buffer
		err := root.ExecuteTemplate(&buf, name, data)
		return buf.String(), err
	}
	funcs["tpl"] = func(text string, data interface{}) (string, error) {
		t, err := root.Clone()
		if err != nil {
			return "", err
		}
		if t, err = t.New("tpl").Parse(text); err != nil {
			return "", err
		}
		var buf bytes.Buffer
		err = t.Execute(&buf, data)
		return buf.String(), err
	}
	funcs["required"] = func(message string, v interface{}) (interface{}, error) {
		if v == nil || v == "" {
			return nil, fmt.Errorf("%s", message)
		}
		return v, nil
	}
	funcs["fail"] = func(message string) (string, error) { return "", fmt.Errorf("%s", message) }
	funcs["toYaml"] = toYAML
	funcs["fromYaml"] = func(text string) map[string]interface{} {
		m := map[string]interface{}{}
		if err := yaml.Unmarshal([]byte(text), &m); err != nil {
			m["Error"] = err.Error()
		}
		return m
	}
	funcs["toJson"] = func(v interface{}) string {
		data, err := json.Marshal(v)
		if err != nil {
			return ""
		}
		return string(data)
	}
	funcs["fromJson"] = func(text string) map[string]interface{} {
		m := map[string]interface{}{}
		if err := json.Unmarshal([]byte(text), &m); err != nil {
			m["Error"] = err.Error()
		}
		return m
	}
	funcs["lookup"] = func(string, string, string, string) (map[string]interface{}, error) {
		return map[string]interface{}{}, nil
	}
	root.Funcs(funcs)

	names := make([]string, 0, len(c.Templates))
	for path := range c.Templates {
		names = append(names, path)
	}
	sort.Strings(names)
	for _, path := range names {
		if _, err := root.New(name + "/" + path).Parse(c.Templates[path]); err != nil {
			return nil, err
		}
	}
	out := map[string]string{}
	for _, path := range names {
		base := filepath.Base(path)
		if strings.HasPrefix(base, "_") {
			continue
		}
		data := map[string]interface{}{}
		for k, v := range top {
			data[k] = v
		}
		data["Template"] = map[string]interface{}{"Name": name + "/" + path, "BasePath": name + "/templates"}
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, name+"/"+path, data); err != nil {
			return nil, err
		}
		out[path] = buf.String()
	}
	return out, nil
}

// Manifests splits rendered templates into YAML documents (NOTES.txt left out), each parsed; a
// document that is not YAML is an error naming its template.
func Manifests(rendered map[string]string) ([]map[string]interface{}, error) {
	var docs []map[string]interface{}
	paths := make([]string, 0, len(rendered))
	for p := range rendered {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, path := range paths {
		if strings.HasSuffix(path, "NOTES.txt") {
			continue
		}
		dec := yaml.NewDecoder(strings.NewReader(rendered[path]))
		for i := 0; ; i++ {
			var doc map[string]interface{}
			err := dec.Decode(&doc)
			if err != nil {
				if err.Error() == "EOF" {
					break
				}
				return nil, fmt.Errorf("%s, document %d: not YAML: %v\n%s", path, i, err, rendered[path])
			}
			if doc == nil {
				continue
			}
			doc["__template"] = path
			docs = append(docs, doc)
		}
	}
	return docs, nil
}

// `go run . CHART [-f values.yaml]... [--name NAME] [--namespace NS]`: prints the manifests, as
// `helm template` would.
func main() {
	args := os.Args[1:]
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: render CHART_DIR [-f VALUES]... [--name RELEASE] [--namespace NS]")
		os.Exit(2)
	}
	chart, err := LoadChart(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	release := Release{Name: "podscope", Namespace: "default"}
	var overrides []map[string]interface{}
	for i := 1; i < len(args); i++ {
		if i+1 >= len(args) {
			fmt.Fprintf(os.Stderr, "%s needs a value\n", args[i])
			os.Exit(2)
		}
		switch args[i] {
		case "-f":
			v, err := ReadValuesFile(args[i+1])
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			overrides = append(overrides, v)
		case "--name":
			release.Name = args[i+1]
		case "--namespace":
			release.Namespace = args[i+1]
		default:
			fmt.Fprintf(os.Stderr, "unknown argument %s\n", args[i])
			os.Exit(2)
		}
		i++
	}
	rendered, err := chart.Render(release, overrides...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	paths := make([]string, 0, len(rendered))
	for p := range rendered {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if strings.HasSuffix(p, "NOTES.txt") || strings.TrimSpace(rendered[p]) == "" {
			continue
		}
		fmt.Printf("---\n# Source: %s/%s\n%s\n", chart.Meta["name"], p, strings.TrimSpace(rendered[p]))
	}
	fmt.Fprintf(os.Stderr, "%s", rendered["templates/NOTES.txt"])
}
