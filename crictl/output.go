package crictl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"text/template"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"
)

// Output formats accepted by -o/--output, as upstream crictl names them.
const (
	formatTable      = "table"
	formatJSON       = "json"
	formatYAML       = "yaml"
	formatGoTemplate = "go-template"
)

// Table column headers, spelled as upstream crictl prints them.
const (
	colContainer = "CONTAINER"
	colImage     = "IMAGE"
	colImageID   = "IMAGE ID"
	colCreated   = "CREATED"
	colState     = "STATE"
	colName      = "NAME"
	colAttempt   = "ATTEMPT"
	colPod       = "POD"
	colPodID     = "POD ID"
	colRuntime   = "RUNTIME"
	colNamespace = "NAMESPACE"
	colSize      = "SIZE"
	colTag       = "TAG"
	colDigest    = "DIGEST"
	colPinned    = "PINNED"
	colCPU       = "CPU %"
	colMem       = "MEM"
	colDisk      = "DISK"
	colInodes    = "INODES"
	colSwap      = "SWAP"
)

// truncatedIDLen is how many characters of a container, sandbox or image ID the tables show.
const truncatedIDLen = 13

// table writes aligned columns the way upstream crictl does: tabwriter with a minimum cell width of 20,
// a padding of 3 spaces.
type table struct{ w *tabwriter.Writer }

func newTable(out io.Writer) *table {
	return &table{w: tabwriter.NewWriter(out, 20, 1, 3, ' ', 0)}
}

// row adds one row; cells must not contain tabs or newlines.
func (t *table) row(cells ...string) { fmt.Fprintln(t.w, strings.Join(cells, "\t")) }

// flush writes the aligned rows.
func (t *table) flush() error { return t.w.Flush() }

// truncateID drops prefix (e.g. "sha256:") and shortens the rest to truncatedIDLen characters.
func truncateID(id, prefix string) string {
	id = strings.TrimPrefix(id, prefix)
	if len(id) > truncatedIDLen {
		id = id[:truncatedIDLen]
	}
	return id
}

// protoJSON renders a CRI message as indented JSON with default values emitted (camelCase field names,
// enum names as strings), which is the shape upstream crictl prints for -o json.
func protoJSON(m proto.Message) ([]byte, error) {
	b, err := protojson.MarshalOptions{EmitDefaultValues: true, Indent: "  "}.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode %s as JSON: %w", m.ProtoReflect().Descriptor().Name(), err)
	}
	// protojson deliberately varies its whitespace; normalise it so output is stable across runs.
	var buf bytes.Buffer
	if err := json.Indent(&buf, compactJSON(b), "", "  "); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func compactJSON(b []byte) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return b
	}
	return buf.Bytes()
}

// printProto writes a list response (ps, pods, images, stats…) in the json or yaml format.
func printProto(out io.Writer, m proto.Message, format string) error {
	b, err := protoJSON(m)
	if err != nil {
		return err
	}
	switch format {
	case formatJSON:
		_, err = fmt.Fprintln(out, string(b))
		return err
	case formatYAML:
		y, err := yaml.JSONToYAML(b)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(out, string(y))
		return err
	}
	return fmt.Errorf("unsupported output format %q", format)
}

// checkFormat validates an -o value against the formats a command accepts.
func checkFormat(format string, allowed ...string) error {
	for _, a := range allowed {
		if format == a {
			return nil
		}
	}
	return fmt.Errorf("--output: unsupported format %q, want one of %s", format, strings.Join(allowed, "|"))
}

// statusDoc is one object of an inspect-style answer: the message as "status" (the timestamps named in
// times replaced by their RFC 3339 text) plus extra keys and the verbose info map the runtime returned
// (values that look like JSON are decoded, others kept as text). It is the document upstream crictl
// renders for inspect, inspectp, inspecti, info and imagefsinfo; like upstream's, its keys come out
// sorted.
type statusDoc struct {
	status proto.Message
	times  map[string]time.Time
	// allFields lists every top-level field of status, unset message fields as null, as upstream's
	// inspect and inspectp do.
	allFields bool
	extra     map[string]any
	info      map[string]string
}

func (d statusDoc) toMap() (map[string]any, error) {
	m := map[string]any{}
	if d.status != nil {
		b, err := protoJSON(d.status)
		if err != nil {
			return nil, err
		}
		var status map[string]any
		if err := json.Unmarshal(b, &status); err != nil {
			return nil, err
		}
		if d.allFields {
			fields := d.status.ProtoReflect().Descriptor().Fields()
			for i := 0; i < fields.Len(); i++ {
				if _, ok := status[fields.Get(i).JSONName()]; !ok {
					status[fields.Get(i).JSONName()] = nil
				}
			}
		}
		for k, t := range d.times {
			status[k] = t.Format(time.RFC3339Nano)
		}
		m["status"] = status
	}
	for k, v := range d.extra {
		m[k] = v
	}
	for k, v := range d.info {
		if strings.HasPrefix(v, "{") || strings.HasPrefix(v, "[") {
			var g any
			if err := json.Unmarshal([]byte(v), &g); err == nil {
				m[k] = g
				continue
			}
		}
		m[k] = strings.Trim(v, `"`)
	}
	return m, nil
}

// printStatus renders inspect-style documents as json (default), yaml or a go-template. A single
// document is printed bare; several are printed as a list, as upstream does.
func printStatus(out io.Writer, docs []statusDoc, format, tmpl string) error {
	if len(docs) == 0 {
		return nil
	}
	maps := make([]any, 0, len(docs))
	for _, d := range docs {
		m, err := d.toMap()
		if err != nil {
			return err
		}
		maps = append(maps, m)
	}
	var v any = maps
	if len(maps) == 1 {
		v = maps[0]
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	switch format {
	case formatJSON, "":
		var buf bytes.Buffer
		if err := json.Indent(&buf, raw, "", "  "); err != nil {
			return err
		}
		_, err = fmt.Fprintln(out, buf.String())
		return err
	case formatYAML:
		y, err := yaml.JSONToYAML(raw)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(out, string(y))
		return err
	case formatGoTemplate:
		s, err := execTemplate(tmpl, raw)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(out, s)
		return err
	}
	return fmt.Errorf("--output: unsupported format %q, want one of json|yaml|go-template|table", format)
}

// inspected is one object's status answer (inspect, inspectp, inspecti): its -o table text, or its
// document for the other formats.
type inspected struct {
	table func(out io.Writer)
	doc   statusDoc
}

// printInspected gets the status of each of ids in turn and prints them in the -o format of o: table
// entries one after the other, or the documents together (printStatus). It stops at the first error.
func printInspected(out io.Writer, o *statusFlags, ids []string, get func(id string) (inspected, error)) error {
	var docs []statusDoc
	for _, id := range ids {
		r, err := get(id)
		if err != nil {
			return err
		}
		if o.output == formatTable {
			r.table(out)
			continue
		}
		docs = append(docs, r.doc)
	}
	return printStatus(out, docs, o.output, o.template)
}

// templateFuncs are the helpers upstream offers inside --template: json, title, lower, upper.
var templateFuncs = template.FuncMap{
	"json": func(v any) (string, error) {
		b, err := json.Marshal(v)
		return string(b) + "\n", err
	},
	"title": func(s string) string {
		if s == "" {
			return s
		}
		return strings.ToUpper(s[:1]) + s[1:]
	},
	"lower": strings.ToLower,
	"upper": strings.ToUpper,
}

// parseTemplate parses a --template value (required with -o go-template).
func parseTemplate(tmpl string) (*template.Template, error) {
	if tmpl == "" {
		return nil, fmt.Errorf("--template is required with -o go-template")
	}
	t, err := template.New("crictl").Funcs(templateFuncs).Option("missingkey=error").Parse(tmpl)
	if err != nil {
		return nil, fmt.Errorf("--template: %w", err)
	}
	return t, nil
}

// execTemplate runs a Go text/template over a JSON document (numbers kept exact). A key the document
// lacks is an error, not "<no value>".
func execTemplate(tmpl string, rawJSON []byte) (string, error) {
	t, err := parseTemplate(tmpl)
	if err != nil {
		return "", err
	}
	dec := json.NewDecoder(bytes.NewReader(rawJSON))
	dec.UseNumber()
	var data any
	if err := dec.Decode(&data); err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		return "", fmt.Errorf("--template: %w", err)
	}
	return buf.String(), nil
}

// humanDuration renders an age the way crictl's CREATED column does ("Less than a second",
// "About a minute", "5 minutes", "2 hours", "3 days", "2 weeks", "4 months", "2 years").
func humanDuration(d time.Duration) string {
	switch s := int(d.Seconds()); {
	case s < 1:
		return "Less than a second"
	case s == 1:
		return "1 second"
	case s < 60:
		return fmt.Sprintf("%d seconds", s)
	}
	switch m := int(d.Minutes()); {
	case m == 1:
		return "About a minute"
	case m < 60:
		return fmt.Sprintf("%d minutes", m)
	}
	switch h := int(d.Hours() + 0.5); {
	case h == 1:
		return "About an hour"
	case h < 48:
		return fmt.Sprintf("%d hours", h)
	case h < 24*7*2:
		return fmt.Sprintf("%d days", h/24)
	case h < 24*30*2:
		return fmt.Sprintf("%d weeks", h/24/7)
	case h < 24*365*2:
		return fmt.Sprintf("%d months", h/24/30)
	default:
		return fmt.Sprintf("%d years", int(d.Hours())/24/365)
	}
}

// ago renders a CRI timestamp (nanoseconds since the epoch) as "<duration> ago" relative to now.
func ago(unixNano int64, now time.Time) string {
	return humanDuration(now.Sub(time.Unix(0, unixNano))) + " ago"
}

var decimalUnits = []string{"B", "kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"}

// humanSize renders a byte count with decimal (1000-based) units and the given number of significant
// digits: humanSize(4_521_000, 3) == "4.52MB". It matches the SIZE column of crictl images.
func humanSize(bytes float64, precision int) string {
	i := 0
	for bytes >= 1000 && i < len(decimalUnits)-1 {
		bytes /= 1000
		i++
	}
	return fmt.Sprintf("%.*g%s", precision, bytes, decimalUnits[i])
}
