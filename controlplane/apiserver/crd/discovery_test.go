package crd

import (
	"reflect"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func testCRD(group string, established bool, versions ...apiextensionsv1.CustomResourceDefinitionVersion) *apiextensionsv1.CustomResourceDefinition {
	crd := &apiextensionsv1.CustomResourceDefinition{Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: group, Versions: versions}}
	if established {
		crd.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue}}
	}
	return crd
}

// TestWantedGroups: only Established CRDs' served versions are listed, in Kubernetes' priority order
// (GA before beta before alpha, the first preferred), merged across the CRDs of one group; a builtin
// group is never listed.
func TestWantedGroups(t *testing.T) {
	v := func(name string, served bool) apiextensionsv1.CustomResourceDefinitionVersion {
		return apiextensionsv1.CustomResourceDefinitionVersion{Name: name, Served: served}
	}
	got := wantedGroups([]*apiextensionsv1.CustomResourceDefinition{
		testCRD("a.example.com", true, v("v1beta1", true), v("v2alpha1", false)),
		testCRD("a.example.com", true, v("v1", true), v("v1beta1", true), v("v1alpha1", true)),
		testCRD("pending.example.com", false, v("v1", true)),
		testCRD("unserved.example.com", true, v("v1", false)),
		testCRD("apps", true, v("v9", true)),
	}, []string{"apps"})
	gv := func(g, v string) metav1.GroupVersionForDiscovery {
		return metav1.GroupVersionForDiscovery{GroupVersion: g + "/" + v, Version: v}
	}
	want := map[string]metav1.APIGroup{"a.example.com": {
		Name:             "a.example.com",
		Versions:         []metav1.GroupVersionForDiscovery{gv("a.example.com", "v1"), gv("a.example.com", "v1beta1"), gv("a.example.com", "v1alpha1")},
		PreferredVersion: gv("a.example.com", "v1"),
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("wantedGroups:\n got %+v\nwant %+v", got, want)
	}
}

// fakeGroups records the groups a publisher adds and removes.
type fakeGroups map[string]metav1.APIGroup

func (f fakeGroups) AddGroup(g metav1.APIGroup) { f[g.Name] = g }
func (f fakeGroups) RemoveGroup(name string)    { delete(f, name) }

// TestPublisherRemovesGoneGroups: a group whose last CRD goes is removed from the list; groups the
// publisher did not add stay.
func TestPublisherRemovesGoneGroups(t *testing.T) {
	groups := fakeGroups{"apps": {Name: "apps"}}
	crds := []*apiextensionsv1.CustomResourceDefinition{testCRD("a.example.com", true, apiextensionsv1.CustomResourceDefinitionVersion{Name: "v1", Served: true})}
	p := &publisher{groups: groups, builtin: []string{"apps"}, published: map[string]bool{},
		list: func() ([]*apiextensionsv1.CustomResourceDefinition, error) { return crds, nil }}
	p.sync()
	if _, ok := groups["a.example.com"]; !ok || len(groups) != 2 {
		t.Fatalf("after a CRD: %v", groups)
	}
	crds = nil
	p.sync()
	if _, ok := groups["a.example.com"]; ok || len(groups) != 1 {
		t.Fatalf("after its deletion: %v", groups)
	}
}
