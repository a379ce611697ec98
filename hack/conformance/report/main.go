// Command report turns the upstream e2e suite's ginkgo reports into the conformance run's results
// (hack/conformance/run.sh):
//
//	report specs DRYRUN.json > specs.tsv
//	    the specs a focus selects, from `e2e.test --ginkgo.dry-run --ginkgo.json-report`: one line
//	    per spec, "serial\t<full text>" or "parallel\t<full text>" ([Serial] in its text or labels).
//	report focus < texts
//	    a ginkgo focus regexp matching exactly the spec full texts read one per line (ginkgo matches
//	    it against "<suite description> <full text>").
//	report summary -specs specs.tsv -out DIR [-crashed crashed.tsv] [-notrun REASON] JUNIT.xml...
//	    joins the JUnit files of every chunk the run made (a later result of a spec replaces an
//	    earlier one) with the spec list: DIR/junit.xml holds one test case per listed spec (a spec in
//	    crashed.tsv, "<full text>\t<message>", is an error; a spec no report has is skipped with
//	    REASON), DIR/summary.txt the totals (passed / failed / skipped), per SIG, and every
//	    failure's first error line. The summary is also printed.
package main

import (
	"bufio"
	"encoding/json"
	"encoding/xml"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: report specs DRYRUN.json | report summary -specs FILE -out DIR JUNIT...")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "specs":
		if len(os.Args) != 3 {
			err = fmt.Errorf("usage: report specs DRYRUN.json")
			break
		}
		err = specs(os.Args[2], os.Stdout)
	case "summary":
		err = summaryCmd(os.Args[2:])
	case "focus":
		err = focus(os.Stdin, os.Stdout)
	default:
		err = fmt.Errorf("unknown command %q (specs, summary)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

// specReport is the part of ginkgo's types.SpecReport (JSON report) that names a spec.
type specReport struct {
	ContainerHierarchyTexts  []string
	ContainerHierarchyLabels [][]string
	LeafNodeType             string
	LeafNodeText             string
	LeafNodeLabels           []string
	State                    string
}

func (s specReport) fullText() string {
	var parts []string
	for _, t := range append(slices.Clone(s.ContainerHierarchyTexts), s.LeafNodeText) {
		if t != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, " ")
}

func (s specReport) serial() bool {
	if strings.Contains(s.fullText(), "[Serial]") || slices.Contains(s.LeafNodeLabels, "Serial") {
		return true
	}
	for _, ls := range s.ContainerHierarchyLabels {
		if slices.Contains(ls, "Serial") {
			return true
		}
	}
	return false
}

// specs lists the It specs a dry run selected (state other than skipped/pending).
func specs(file string, w io.Writer) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var reports []struct{ SpecReports []specReport }
	if err := json.Unmarshal(data, &reports); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	for _, r := range reports {
		for _, s := range r.SpecReports {
			if s.LeafNodeType != "It" || s.State == "skipped" || s.State == "pending" {
				continue
			}
			kind := "parallel"
			if s.serial() {
				kind = "serial"
			}
			fmt.Fprintf(w, "%s\t%s\n", kind, s.fullText())
		}
	}
	return nil
}

// focus prints the regexp matching exactly the full texts read from r, one per line.
func focus(r io.Reader, w io.Writer) error {
	var quoted []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if t := sc.Text(); t != "" {
			quoted = append(quoted, regexp.QuoteMeta(t))
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if len(quoted) == 0 {
		return fmt.Errorf("focus: no spec texts on stdin")
	}
	_, err := fmt.Fprintf(w, "(?:^| )(?:%s)$", strings.Join(quoted, "|"))
	return err
}

// JUnit as ginkgo writes it (reporters.JUnitTestSuites), reduced to what the summary needs.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Status    string        `xml:"status,attr"`
	Time      float64       `xml:"time,attr"`
	Skipped   *junitMessage `xml:"skipped"`
	Failure   *junitMessage `xml:"failure"`
	Error     *junitMessage `xml:"error"`
	SystemErr string        `xml:"system-err,omitempty"`
}

type junitMessage struct {
	Message     string `xml:"message,attr"`
	Type        string `xml:"type,attr,omitempty"`
	Description string `xml:",chardata"`
}

// leafName strips ginkgo's "[It] " prefix; labels and version constraints are appended after the
// full text as " [a, b]", so the full text is a prefix of the rest.
func leafName(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, "[It] ")
	return rest, ok
}

// result of one spec in the run.
type result struct {
	text    string
	status  string // passed, failed, skipped, notrun, or ginkgo's other states (timedout, panicked, ...)
	message string
	jc      *junitCase
}

func (r result) failed() bool {
	return r.status != "passed" && r.status != "skipped" && r.status != "notrun"
}

var sigRE = regexp.MustCompile(`^\[(sig-[a-z0-9-]+)\]`)

func sigOf(text string) string {
	if m := sigRE.FindStringSubmatch(text); m != nil {
		return m[1]
	}
	return "other"
}

// firstLine is the first non-empty line of msg, trimmed to 300 bytes.
func firstLine(msg string) string {
	for l := range strings.SplitSeq(msg, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			if len(l) > 300 {
				l = l[:300] + "…"
			}
			return l
		}
	}
	return ""
}

func summaryCmd(args []string) error {
	fs := flag.NewFlagSet("summary", flag.ContinueOnError)
	specFile := fs.String("specs", "", "spec list from `report specs`")
	out := fs.String("out", "", "output directory (junit.xml, summary.txt)")
	crashed := fs.String("crashed", "", "specs whose e2e process crashed: \"<full text>\\t<message>\" lines")
	notRun := fs.String("notrun", "not run", "message for specs no report has")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *specFile == "" || *out == "" {
		return fmt.Errorf("summary: -specs and -out are required")
	}
	texts, err := readSpecs(*specFile)
	if err != nil {
		return err
	}
	results := make(map[string]*result, len(texts))
	for _, t := range texts {
		results[t] = &result{text: t, status: "notrun", message: *notRun}
	}
	var suiteFailures []string
	for _, file := range fs.Args() {
		if err := mergeJUnit(file, texts, results, &suiteFailures); err != nil {
			return err
		}
	}
	if *crashed != "" {
		if err := mergeCrashed(*crashed, results); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	if err := writeJUnit(filepath.Join(*out, "junit.xml"), texts, results); err != nil {
		return err
	}
	var sb strings.Builder
	writeSummary(&sb, texts, results, suiteFailures)
	if err := os.WriteFile(filepath.Join(*out, "summary.txt"), []byte(sb.String()), 0o644); err != nil {
		return err
	}
	fmt.Print(sb.String())
	return nil
}

func readSpecs(file string) ([]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var texts []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if _, text, ok := strings.Cut(sc.Text(), "\t"); ok && text != "" {
			texts = append(texts, text)
		}
	}
	return texts, sc.Err()
}

// mergeJUnit records file's results of the listed specs; a failed suite node (BeforeSuite and the
// like) is kept in suiteFailures.
func mergeJUnit(file string, texts []string, results map[string]*result, suiteFailures *[]string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var doc junitSuites
	if err := xml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	for _, s := range doc.Suites {
		for i := range s.Cases {
			c := &s.Cases[i]
			name, isIt := leafName(c.Name)
			if !isIt {
				if c.Failure != nil || c.Error != nil {
					*suiteFailures = append(*suiteFailures, fmt.Sprintf("%s (%s): %s", c.Name, filepath.Base(filepath.Dir(file)), firstLine(message(c))))
				}
				continue
			}
			r := lookup(name, texts, results)
			if r == nil || (c.Status == "skipped" && r.jc != nil) {
				continue // not listed, or filtered out of this chunk after running in another
			}
			if c.Status == "skipped" && strings.TrimSpace(message(c)) == "skipped" {
				continue // filtered out by this chunk's focus, not skipped by the test
			}
			r.status, r.message, r.jc = c.Status, message(c), c
		}
	}
	return nil
}

func lookup(name string, texts []string, results map[string]*result) *result {
	if r, ok := results[name]; ok {
		return r
	}
	// Labels follow the full text: "<text> [Conformance, ...]".
	for _, t := range texts {
		if strings.HasPrefix(name, t+" [") {
			return results[t]
		}
	}
	return nil
}

func message(c *junitCase) string {
	for _, m := range []*junitMessage{c.Failure, c.Error, c.Skipped} {
		if m != nil {
			if m.Message != "" {
				return m.Message
			}
			return m.Description
		}
	}
	return ""
}

func mergeCrashed(file string, results map[string]*result) error {
	data, err := os.ReadFile(file)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		text, msg, _ := strings.Cut(line, "\t")
		if r, ok := results[text]; ok && r.jc == nil {
			r.status, r.message = "crashed", msg
		}
	}
	return nil
}

func writeJUnit(file string, texts []string, results map[string]*result) error {
	suite := junitSuite{Name: "Kubernetes e2e suite (nodekit conformance)"}
	for _, t := range texts {
		r := results[t]
		c := junitCase{Name: "[It] " + t, Classname: "Kubernetes e2e suite", Status: r.status}
		if r.jc != nil {
			c = *r.jc
		}
		switch {
		case r.status == "notrun":
			c.Skipped = &junitMessage{Message: r.message}
		case r.status == "crashed":
			c.Error = &junitMessage{Message: r.message, Type: "crashed"}
		}
		suite.Tests++
		switch {
		case c.Skipped != nil:
			suite.Skipped++
		case c.Error != nil:
			suite.Errors++
		case c.Failure != nil:
			suite.Failures++
		}
		suite.Cases = append(suite.Cases, c)
	}
	doc := junitSuites{Tests: suite.Tests, Failures: suite.Failures, Errors: suite.Errors, Suites: []junitSuite{suite}}
	data, err := xml.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(file, append([]byte(xml.Header), append(data, '\n')...), 0o644)
}

type counts struct{ total, passed, failed, skipped, notRun int }

func (c *counts) add(r *result) {
	c.total++
	switch {
	case r.status == "passed":
		c.passed++
	case r.status == "skipped":
		c.skipped++
	case r.status == "notrun":
		c.notRun++
	default:
		c.failed++
	}
}

func (c counts) String() string {
	return fmt.Sprintf("total %d, passed %d, failed %d, skipped %d, not run %d", c.total, c.passed, c.failed, c.skipped, c.notRun)
}

func writeSummary(w io.Writer, texts []string, results map[string]*result, suiteFailures []string) {
	var all counts
	bySIG := map[string]*counts{}
	for _, t := range texts {
		r := results[t]
		all.add(r)
		sig := sigOf(t)
		if bySIG[sig] == nil {
			bySIG[sig] = &counts{}
		}
		bySIG[sig].add(r)
	}
	fmt.Fprintf(w, "conformance: %s\n", all)
	sigs := make([]string, 0, len(bySIG))
	for s := range bySIG {
		sigs = append(sigs, s)
	}
	slices.Sort(sigs)
	for _, s := range sigs {
		fmt.Fprintf(w, "  %-22s %s\n", s, bySIG[s])
	}
	for _, f := range suiteFailures {
		fmt.Fprintf(w, "suite node failed: %s\n", f)
	}
	var failed []*result
	for _, t := range texts {
		if r := results[t]; r.failed() {
			failed = append(failed, r)
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(w, "failures (%d):\n", len(failed))
		for _, r := range failed {
			fmt.Fprintf(w, "- %s\n    %s: %s\n", r.text, r.status, firstLine(r.message))
		}
	}
}
