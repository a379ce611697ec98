package crictl

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/yaml"
)

func TestHumanDuration(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{500 * time.Millisecond, "Less than a second"},
		{time.Second, "1 second"},
		{42 * time.Second, "42 seconds"},
		{61 * time.Second, "About a minute"},
		{5*time.Minute + 10*time.Second, "5 minutes"},
		{59 * time.Minute, "59 minutes"},
		{61 * time.Minute, "About an hour"},
		{3 * time.Hour, "3 hours"},
		{47 * time.Hour, "47 hours"},
		{3 * 24 * time.Hour, "3 days"},
		{15 * 24 * time.Hour, "2 weeks"},
		{70 * 24 * time.Hour, "2 months"},
		{800 * 24 * time.Hour, "2 years"},
	} {
		if got := humanDuration(tc.d); got != tc.want {
			t.Errorf("humanDuration(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
	now := time.Now()
	if got := ago(now.Add(-3*time.Minute).UnixNano(), now); got != "3 minutes ago" {
		t.Errorf("ago = %q", got)
	}
}

func TestHumanSizeAndTruncate(t *testing.T) {
	for _, tc := range []struct {
		n    float64
		want string
	}{{0, "0B"}, {999, "999B"}, {4_521_000, "4.52MB"}, {312_345, "312kB"}, {1_000_000_000, "1GB"}} {
		if got := humanSize(tc.n, 3); got != tc.want {
			t.Errorf("humanSize(%v) = %q, want %q", tc.n, got, tc.want)
		}
	}
	id := "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	if got := truncateID(id, "sha256:"); got != "0123456789abc" {
		t.Errorf("truncateID = %q", got)
	}
	if got := shortImage(id); got != "0123456789abc" {
		t.Errorf("shortImage(digest) = %q", got)
	}
	if got := shortImage("nodekit.local/demo:1"); got != "nodekit.local/demo:1" {
		t.Errorf("shortImage(name) = %q", got)
	}
}

func TestTableColumns(t *testing.T) {
	var buf bytes.Buffer
	tb := newTable(&buf)
	tb.row(colPodID, colCreated, colState, colName, colNamespace, colAttempt, colRuntime)
	tb.row("0123456789abc", "2 minutes ago", "Ready", "web", "default", "0", "(default)")
	if err := tb.flush(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	want := "POD ID              CREATED             STATE               NAME                NAMESPACE           ATTEMPT             RUNTIME"
	if lines[0] != want {
		t.Errorf("header\n got %q\nwant %q", lines[0], want)
	}
	// Cells line up under their headers (tabwriter, min width 20, padding 3).
	if i, j := strings.Index(lines[0], "STATE"), strings.Index(lines[1], "Ready"); i != j {
		t.Errorf("STATE at %d but Ready at %d:\n%s", i, j, buf.String())
	}
}

func samplePods() *runtimeapi.ListPodSandboxResponse {
	return &runtimeapi.ListPodSandboxResponse{Items: []*runtimeapi.PodSandbox{{
		Id:        strings.Repeat("ab", 32),
		Metadata:  &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "u1"},
		State:     runtimeapi.PodSandboxState_SANDBOX_READY,
		CreatedAt: 1700000000000000000,
		Labels:    map[string]string{"app": "web"},
	}}}
}

func TestPrintProtoJSONAndYAML(t *testing.T) {
	var buf bytes.Buffer
	if err := printProto(&buf, samplePods(), formatJSON); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Items []struct {
			ID        string            `json:"id"`
			State     string            `json:"state"`
			CreatedAt string            `json:"createdAt"`
			Labels    map[string]string `json:"labels"`
			Metadata  struct{ Name, Namespace string }
			// A default value is emitted, as upstream does (EmitDefaultValues).
			RuntimeHandler *string `json:"runtimeHandler"`
		}
	}
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("json output does not parse: %v\n%s", err, buf.String())
	}
	it := got.Items[0]
	if it.ID != strings.Repeat("ab", 32) || it.State != "SANDBOX_READY" || it.CreatedAt != "1700000000000000000" ||
		it.Labels["app"] != "web" || it.Metadata.Name != "web" || it.RuntimeHandler == nil {
		t.Errorf("unexpected JSON document: %+v\n%s", it, buf.String())
	}
	if !strings.Contains(buf.String(), "\n  \"items\": [") {
		t.Errorf("JSON is not indented by two spaces:\n%s", buf.String())
	}
	buf.Reset()
	if err := printProto(&buf, samplePods(), formatYAML); err != nil {
		t.Fatal(err)
	}
	var y map[string][]map[string]any
	if err := yaml.Unmarshal(buf.Bytes(), &y); err != nil {
		t.Fatalf("yaml output does not parse: %v\n%s", err, buf.String())
	}
	if y["items"][0]["state"] != "SANDBOX_READY" {
		t.Errorf("yaml: %s", buf.String())
	}
}

func TestPrintStatusFormats(t *testing.T) {
	st := &runtimeapi.PodSandboxStatus{Id: "abc", State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY, CreatedAt: 1700000000123456789,
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "ns"}}
	doc := statusDoc{status: st, info: map[string]string{"info": `{"pid": 42}`, "plain": `"text"`},
		times: map[string]time.Time{"createdAt": time.Unix(0, st.CreatedAt)}}
	var buf bytes.Buffer
	if err := printStatus(&buf, []statusDoc{doc}, formatJSON, ""); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	status := m["status"].(map[string]any)
	wantTime := time.Unix(0, st.CreatedAt).Format(time.RFC3339Nano)
	if status["createdAt"] != wantTime || status["state"] != "SANDBOX_NOTREADY" {
		t.Errorf("status = %v", status)
	}
	if m["info"].(map[string]any)["pid"] != float64(42) || m["plain"] != "text" {
		t.Errorf("info decoding: %v", m)
	}
	// Keys come out sorted at every level, as upstream's (which re-decodes into maps) do.
	out := buf.String()
	if i, j, k := strings.Index(out, `"createdAt"`), strings.Index(out, `"id"`), strings.Index(out, `"state"`); !(i < j && j < k) {
		t.Errorf("status keys not sorted:\n%s", out)
	}

	buf.Reset()
	if err := printStatus(&buf, []statusDoc{doc}, formatGoTemplate, "{{.status.metadata.name}}/{{.status.state | lower}} {{.info.pid}}"); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(buf.String()); got != "web/sandbox_notready 42" {
		t.Errorf("go-template output = %q", got)
	}
	err := printStatus(&buf, []statusDoc{doc}, formatGoTemplate, "{{.status.nosuchkey}}")
	if err == nil || !strings.Contains(err.Error(), "nosuchkey") {
		t.Errorf("missing key: err = %v, want an error naming the key", err)
	}
	if err := printStatus(&buf, []statusDoc{doc}, formatGoTemplate, ""); err == nil {
		t.Error("go-template without --template: want an error")
	}

	// Several documents print as a list.
	buf.Reset()
	if err := printStatus(&buf, []statusDoc{doc, doc}, formatYAML, ""); err != nil {
		t.Fatal(err)
	}
	var list []map[string]any
	if err := yaml.Unmarshal(buf.Bytes(), &list); err != nil || len(list) != 2 {
		t.Errorf("yaml list: %v %v\n%s", err, list, buf.String())
	}
	if err := checkFormat("xml", formatJSON, formatYAML); err == nil || !strings.Contains(err.Error(), "json|yaml") {
		t.Errorf("checkFormat: %v", err)
	}
}

func TestFilterImages(t *testing.T) {
	img := func(id string, tags ...string) *runtimeapi.Image {
		return &runtimeapi.Image{Id: "sha256:" + id, RepoTags: tags}
	}
	all := []*runtimeapi.Image{img("aaa111"), img("bbb222", "nodekit.local/demo-server:v1"), img("ccc333", "nodekit.local/demo-server:v2"), img("ddd444", "nodekit.local/pause:3.10")}
	sortImages(all)
	ids := func(imgs []*runtimeapi.Image) string {
		var s []string
		for _, im := range imgs {
			s = append(s, strings.TrimPrefix(im.GetId(), "sha256:")[:3])
		}
		return strings.Join(s, ",")
	}
	for _, tc := range []struct {
		filters []string
		want    string
	}{
		// Upstream's order: by first tag where both have one, else by ID (so the untagged image first).
		{nil, "aaa,bbb,ccc,ddd"},
		{[]string{"dangling=true"}, "aaa"},
		{[]string{"dangling=false"}, "bbb,ccc,ddd"},
		{[]string{"reference=demo-server"}, "bbb,ccc"},
		{[]string{"reference=:v2$"}, "ccc"},
		{[]string{"before=nodekit.local/demo-server:v2"}, "ddd"},
		{[]string{"since=nodekit.local/pause"}, "aaa,bbb,ccc"},
		{[]string{"dangling=false", "since=ddd444"}, "bbb,ccc"},
	} {
		got, err := filterImages(slices.Clone(all), tc.filters)
		if err != nil || ids(got) != tc.want {
			t.Errorf("filterImages(%v) = %s, %v; want %s", tc.filters, ids(got), err, tc.want)
		}
	}
	for _, bad := range []string{"dangling=maybe", "reference=(", "before=nosuch", "color=red"} {
		if _, err := filterImages(all, []string{bad}); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("filterImages(%s): %v", bad, err)
		}
	}
	if v1 := all[1]; !imageMatches(v1, "nodekit.local/demo-server") || imageMatches(v1, "nodekit.local/demo") || !imageMatches(v1, "bbb") {
		t.Error("imageMatches: repo without tag and ID prefix should match, a repo prefix should not")
	}
}

func TestStatusAllFields(t *testing.T) {
	st := &runtimeapi.ContainerStatus{Id: "c1", State: runtimeapi.ContainerState_CONTAINER_RUNNING}
	for _, all := range []bool{false, true} {
		m, err := statusDoc{status: st, allFields: all}.toMap()
		if err != nil {
			t.Fatal(err)
		}
		v, present := m["status"].(map[string]any)["user"]
		if present != all || v != nil {
			t.Errorf("allFields=%v: user present=%v value=%v; upstream's inspect lists unset message fields as null", all, present, v)
		}
	}
}
