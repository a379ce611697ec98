package apiserver_test

import (
	"path"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	fw "github.com/nodekit/nodekit/test/framework/apiserver"
)

// TestDiscoveryServesWhatItLists walks the unaggregated discovery documents (/api, /apis) and GETs every
// group version they list: each answers 200 with an APIResourceList of its own groupVersion, the same
// resources as the aggregated discovery document (apidiscovery.k8s.io/v2, what client-go and kubectl
// read), and every listable resource in it answers a LIST. A group advertised with no version document,
// or a resource advertised but not served, fails here (upstream's Discovery conformance spec GETs
// /apis/<group>/<version> of each group it expects).
func TestDiscoveryServesWhatItLists(t *testing.T) {
	s := fw.Start(t, fw.Options{})
	ctx := ctxT(t)
	rc := s.Client.Discovery().RESTClient()

	legacy := map[string][]string{} // groupVersion -> resource names, from /api/v1 and /apis/<g>/<v>
	get := func(base string, gv schema.GroupVersion) {
		t.Helper()
		p := path.Join(base, gv.Group, gv.Version)
		var list metav1.APIResourceList
		if err := rc.Get().AbsPath(p).Do(ctx).Into(&list); err != nil {
			t.Fatalf("GET %s (listed in %s): %v", p, base, err)
		}
		if list.GroupVersion != gv.String() {
			t.Fatalf("GET %s: groupVersion %q, want %q", p, list.GroupVersion, gv)
		}
		if len(list.APIResources) == 0 {
			t.Fatalf("GET %s: no resources in a listed group version", p)
		}
		for _, r := range list.APIResources {
			legacy[gv.String()] = append(legacy[gv.String()], r.Name)
		}
	}
	var versions metav1.APIVersions
	if err := rc.Get().AbsPath("/api").Do(ctx).Into(&versions); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(versions.Versions, []string{"v1"}) {
		t.Fatalf("/api versions %v, want [v1]", versions.Versions)
	}
	get("/api", schema.GroupVersion{Version: "v1"})
	var groups metav1.APIGroupList
	if err := rc.Get().AbsPath("/apis").SetHeader("Accept", "application/json").Do(ctx).Into(&groups); err != nil {
		t.Fatal(err)
	}
	if len(groups.Groups) == 0 {
		t.Fatal("/apis lists no groups")
	}
	for _, g := range groups.Groups {
		if !slices.ContainsFunc(g.Versions, func(v metav1.GroupVersionForDiscovery) bool { return v == g.PreferredVersion }) {
			t.Fatalf("/apis: group %s prefers %v, not one of its versions %v", g.Name, g.PreferredVersion, g.Versions)
		}
		// the group document lists the same versions as /apis
		var doc metav1.APIGroup
		if err := rc.Get().AbsPath("/apis", g.Name).SetHeader("Accept", "application/json").Do(ctx).Into(&doc); err != nil {
			t.Fatalf("GET /apis/%s: %v", g.Name, err)
		}
		if !slices.Equal(doc.Versions, g.Versions) {
			t.Fatalf("/apis/%s versions %v, /apis lists %v", g.Name, doc.Versions, g.Versions)
		}
		for _, v := range g.Versions {
			get("/apis", schema.GroupVersion{Group: g.Name, Version: v.Version})
		}
	}

	// aggregated discovery (client-go's default) lists the same group versions and resources
	_, aggregated, err := s.Client.Discovery().ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, list := range aggregated {
		want := slices.Sorted(slices.Values(legacy[list.GroupVersion]))
		var names []string
		for _, r := range list.APIResources {
			names = append(names, r.Name)
		}
		if got := slices.Sorted(slices.Values(names)); !slices.Equal(got, want) {
			t.Fatalf("%s: aggregated discovery lists %v, /apis/%s lists %v", list.GroupVersion, got, list.GroupVersion, want)
		}
		seen[list.GroupVersion] = true
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range list.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") {
				continue
			}
			if _, err := dyn.Resource(gv.WithResource(r.Name)).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
				t.Fatalf("list %s (in discovery): %v", gv.WithResource(r.Name), err)
			}
		}
	}
	// the resource metrics API the API server serves itself (docs/metrics.md)
	if got := slices.Sorted(slices.Values(legacy["metrics.k8s.io/v1beta1"])); !slices.Equal(got, []string{"nodes", "pods"}) {
		t.Fatalf("metrics.k8s.io/v1beta1 lists %v, want [nodes pods]", got)
	}
	for gv := range legacy {
		if !seen[gv] {
			t.Fatalf("%s is in /apis but not in aggregated discovery", gv)
		}
	}
	t.Logf("%d group versions, each served as listed", len(legacy))
}
