package crd

import (
	"log/slog"
	"slices"
	"sync"

	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apiserver/pkg/endpoints/discovery"
	"k8s.io/client-go/tools/cache"
)

// PublishDiscovery keeps top's unaggregated group list (GET /apis as an APIGroupList) in step with the
// CRDs: apiextensions.k8s.io itself, and each group with an Established CRD serving a version, its
// versions in Kubernetes' priority order (the first is preferred), as kube-apiserver's aggregator lists
// them. /apis/<group> and /apis/<group>/<version> are served by the apiextensions server itself, and
// the aggregated form of /apis by the AggregatedDiscoveryGroupManager both servers share. Groups in
// builtin (the top server's own) are never replaced or removed. Call it before the server runs.
func (s *Server) PublishDiscovery(groups discovery.GroupManager, builtin []string) error {
	v1 := metav1.GroupVersionForDiscovery{GroupVersion: apiextensionsv1.SchemeGroupVersion.String(), Version: apiextensionsv1.SchemeGroupVersion.Version}
	groups.AddGroup(metav1.APIGroup{Name: apiextensionsv1.GroupName, Versions: []metav1.GroupVersionForDiscovery{v1}, PreferredVersion: v1})
	p := &publisher{groups: groups, builtin: append(slices.Clone(builtin), apiextensionsv1.GroupName), published: map[string]bool{}}
	informer := s.ext.Informers.Apiextensions().V1().CustomResourceDefinitions()
	p.list = func() ([]*apiextensionsv1.CustomResourceDefinition, error) {
		return informer.Lister().List(labels.Everything())
	}
	_, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { p.sync() },
		UpdateFunc: func(_, _ any) { p.sync() },
		DeleteFunc: func(any) { p.sync() },
	})
	return err
}

// groupList is the part of discovery.GroupManager the publisher uses.
type groupList interface {
	AddGroup(apiGroup metav1.APIGroup)
	RemoveGroup(groupName string)
}

type publisher struct {
	groups    groupList
	builtin   []string
	list      func() ([]*apiextensionsv1.CustomResourceDefinition, error)
	mu        sync.Mutex
	published map[string]bool
}

// sync recomputes every CRD group from the informer's cache and adds, replaces or removes its entry.
func (p *publisher) sync() {
	crds, err := p.list()
	if err != nil {
		slog.Warn("apiextensions discovery: list CRDs", "err", err)
		return
	}
	want := wantedGroups(crds, p.builtin)
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, g := range want {
		p.groups.AddGroup(g)
		p.published[name] = true
	}
	for name := range p.published {
		if _, ok := want[name]; !ok {
			p.groups.RemoveGroup(name)
			delete(p.published, name)
		}
	}
}

// wantedGroups is the APIGroup of every group with an Established CRD that serves a version, skipping
// the builtin groups.
func wantedGroups(crds []*apiextensionsv1.CustomResourceDefinition, builtin []string) map[string]metav1.APIGroup {
	versions := map[string][]string{}
	for _, crd := range crds {
		if slices.Contains(builtin, crd.Spec.Group) || !apiextensionshelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if v.Served && !slices.Contains(versions[crd.Spec.Group], v.Name) {
				versions[crd.Spec.Group] = append(versions[crd.Spec.Group], v.Name)
			}
		}
	}
	out := map[string]metav1.APIGroup{}
	for group, vs := range versions {
		slices.SortFunc(vs, func(a, b string) int { return -version.CompareKubeAwareVersionStrings(a, b) })
		g := metav1.APIGroup{Name: group}
		for _, v := range vs {
			g.Versions = append(g.Versions, metav1.GroupVersionForDiscovery{GroupVersion: group + "/" + v, Version: v})
		}
		g.PreferredVersion = g.Versions[0]
		out[group] = g
	}
	return out
}
