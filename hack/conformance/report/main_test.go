package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const dryRun = `[{"SpecReports":[
 {"ContainerHierarchyTexts":["[sig-api-machinery] Namespaces"],"LeafNodeType":"It","LeafNodeText":"should list [Conformance]","State":"passed"},
 {"ContainerHierarchyTexts":["[sig-node] Pods","", "x"],"ContainerHierarchyLabels":[["Serial"]],"LeafNodeType":"It","LeafNodeText":"should (run) [Conformance]","State":"passed"},
 {"ContainerHierarchyTexts":["[sig-node] Other"],"LeafNodeType":"It","LeafNodeText":"filtered","State":"skipped"},
 {"LeafNodeType":"SynchronizedBeforeSuite","State":"passed"}]}]`

const junit = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="4" failures="1"><testsuite name="Kubernetes e2e suite" tests="4">
<testcase name="[SynchronizedBeforeSuite]" classname="Kubernetes e2e suite" status="passed"></testcase>
<testcase name="[It] [sig-api-machinery] Namespaces should list [Conformance] [Conformance]" classname="Kubernetes e2e suite" status="passed" time="1.5"></testcase>
<testcase name="[It] [sig-node] Pods x should (run) [Conformance] [Serial, Conformance]" classname="Kubernetes e2e suite" status="failed" time="3">
<failure message="&#xA;timed out waiting for pod&#xA;second line" type="failed">details</failure></testcase>
<testcase name="[It] [sig-node] Other filtered" classname="Kubernetes e2e suite" status="skipped"><skipped message="skipped"></skipped></testcase>
</testsuite></testsuites>`

func TestSpecsFocusAndSummary(t *testing.T) {
	dir := t.TempDir()
	dry := filepath.Join(dir, "dry.json")
	if err := os.WriteFile(dry, []byte(dryRun), 0o644); err != nil {
		t.Fatal(err)
	}
	var list bytes.Buffer
	if err := specs(dry, &list); err != nil {
		t.Fatal(err)
	}
	want := "parallel\t[sig-api-machinery] Namespaces should list [Conformance]\nserial\t[sig-node] Pods x should (run) [Conformance]\n"
	if list.String() != want {
		t.Fatalf("specs:\n%s\nwant:\n%s", list.String(), want)
	}

	var re bytes.Buffer
	if err := focus(strings.NewReader("[sig-node] Pods x should (run) [Conformance]\n"), &re); err != nil {
		t.Fatal(err)
	}
	rx := regexp.MustCompile(re.String())
	if !rx.MatchString("Kubernetes e2e suite [sig-node] Pods x should (run) [Conformance]") ||
		rx.MatchString("Kubernetes e2e suite [sig-node] Pods x should (run) [Conformance] twice") {
		t.Fatalf("focus %q does not match exactly one spec", re.String())
	}

	specFile := filepath.Join(dir, "specs.tsv")
	// A third listed spec that no report has: not run.
	if err := os.WriteFile(specFile, []byte(want+"parallel\t[sig-apps] Never ran\nparallel\t[sig-apps] Crashed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ju := filepath.Join(dir, "c1", "junit.xml")
	os.MkdirAll(filepath.Dir(ju), 0o755)
	if err := os.WriteFile(ju, []byte(junit), 0o644); err != nil {
		t.Fatal(err)
	}
	crashed := filepath.Join(dir, "crashed.tsv")
	os.WriteFile(crashed, []byte("[sig-apps] Crashed\te2e.test exited 2 without a report: panic: boom\n"), 0o644)
	out := filepath.Join(dir, "out")
	if err := summaryCmd([]string{"-specs", specFile, "-out", out, "-crashed", crashed, "-notrun", "not run: bound", ju}); err != nil {
		t.Fatal(err)
	}
	sum, _ := os.ReadFile(filepath.Join(out, "summary.txt"))
	for _, w := range []string{
		"conformance: total 4, passed 1, failed 2, skipped 0, not run 1",
		"sig-api-machinery      total 1, passed 1, failed 0",
		"sig-apps               total 2, passed 0, failed 1, skipped 0, not run 1",
		"- [sig-node] Pods x should (run) [Conformance]\n    failed: timed out waiting for pod\n",
		"    crashed: e2e.test exited 2 without a report: panic: boom",
	} {
		if !strings.Contains(string(sum), w) {
			t.Errorf("summary lacks %q:\n%s", w, sum)
		}
	}
	merged, _ := os.ReadFile(filepath.Join(out, "junit.xml"))
	if n := strings.Count(string(merged), "<testcase "); n != 4 || !strings.Contains(string(merged), `message="not run: bound"`) {
		t.Errorf("merged junit has %d cases:\n%s", n, merged)
	}
}
