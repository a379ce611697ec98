package scheduler

import (
	"fmt"
	"math"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Inter-pod affinity filter reasons (upstream InterPodAffinity plugin).
const (
	ReasonPodAffinity              = "node(s) didn't match pod affinity rules"
	ReasonPodAntiAffinity          = "node(s) didn't match pod anti-affinity rules"
	ReasonExistingPodsAntiAffinity = "node(s) didn't satisfy existing pods anti-affinity rules"
)

// hardPodAffinityWeight is the score weight of an existing pod's required affinity term that the
// incoming pod matches (upstream InterPodAffinityArgs.HardPodAffinityWeight default).
const hardPodAffinityWeight = 1

// affinityTerm is a parsed v1.PodAffinityTerm: the namespaces it names (the owning pod's own when it
// names none and has no namespaceSelector), its namespaceSelector (nil when absent), its label
// selector with matchLabelKeys (key In value) and mismatchLabelKeys (key NotIn value) merged in from
// the owning pod's labels, and its topologyKey.
type affinityTerm struct {
	Namespaces        sets.Set[string]
	NamespaceSelector labels.Selector
	Selector          labels.Selector
	TopologyKey       string
}

// weightedTerm is a preferred term with its weight (1–100).
type weightedTerm struct {
	affinityTerm
	Weight int32
}

// matches reports whether pod is in one of the term's namespaces (nsLabels are the labels of the
// pod's namespace, for the namespaceSelector) and its labels match the term's selector.
func (t *affinityTerm) matches(pod *v1.Pod, nsLabels labels.Set) bool {
	if !t.Namespaces.Has(pod.Namespace) && (t.NamespaceSelector == nil || !t.NamespaceSelector.Matches(nsLabels)) {
		return false
	}
	return t.Selector.Matches(labels.Set(pod.Labels))
}

// selectorWithLabelKeys converts sel (nil selects nothing) and merges in, from podLabels, key In
// (value) for every key of match and key NotIn (value) for every key of mismatch that podLabels
// carries, as the API server does for matchLabelKeys / mismatchLabelKeys at pod creation (nodekit's
// pod strategy, as kube-apiserver's). Pods created by the API server arrive merged: merging again adds
// identical requirements, which change nothing; pods stored before the API server merged, or created
// by an API server that does not, are still scheduled right.
func selectorWithLabelKeys(sel *metav1.LabelSelector, podLabels map[string]string, match, mismatch []string) (labels.Selector, error) {
	if sel == nil {
		return labels.Nothing(), nil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil, err
	}
	add := func(keys []string, op selection.Operator) error {
		for _, k := range keys {
			v, ok := podLabels[k]
			if !ok {
				continue
			}
			r, err := labels.NewRequirement(k, op, []string{v})
			if err != nil {
				return err
			}
			s = s.Add(*r)
		}
		return nil
	}
	if err := add(match, selection.In); err != nil {
		return nil, err
	}
	if err := add(mismatch, selection.NotIn); err != nil {
		return nil, err
	}
	return s, nil
}

func parseAffinityTerm(pod *v1.Pod, t *v1.PodAffinityTerm) (affinityTerm, error) {
	sel, err := selectorWithLabelKeys(t.LabelSelector, pod.Labels, t.MatchLabelKeys, t.MismatchLabelKeys)
	if err != nil {
		return affinityTerm{}, fmt.Errorf("labelSelector: %w", err)
	}
	at := affinityTerm{Namespaces: sets.New(t.Namespaces...), Selector: sel, TopologyKey: t.TopologyKey}
	if t.NamespaceSelector != nil {
		if at.NamespaceSelector, err = metav1.LabelSelectorAsSelector(t.NamespaceSelector); err != nil {
			return affinityTerm{}, fmt.Errorf("namespaceSelector: %w", err)
		}
	} else if len(t.Namespaces) == 0 {
		at.Namespaces.Insert(pod.Namespace)
	}
	return at, nil
}

// podAffinityTerms holds a pod's parsed inter-pod affinity and anti-affinity terms.
type podAffinityTerms struct {
	RequiredAffinity      []affinityTerm
	RequiredAntiAffinity  []affinityTerm
	PreferredAffinity     []weightedTerm
	PreferredAntiAffinity []weightedTerm
}

// parsePodAffinityTerms parses spec.affinity.podAffinity and .podAntiAffinity. The error names the
// field of the first term whose selector does not parse.
func parsePodAffinityTerms(pod *v1.Pod) (podAffinityTerms, error) {
	var out podAffinityTerms
	a := pod.Spec.Affinity
	if a == nil {
		return out, nil
	}
	required := func(field string, terms []v1.PodAffinityTerm) ([]affinityTerm, error) {
		var res []affinityTerm
		for i := range terms {
			t, err := parseAffinityTerm(pod, &terms[i])
			if err != nil {
				return nil, fmt.Errorf("spec.affinity.%s.requiredDuringSchedulingIgnoredDuringExecution[%d].%w", field, i, err)
			}
			res = append(res, t)
		}
		return res, nil
	}
	preferred := func(field string, terms []v1.WeightedPodAffinityTerm) ([]weightedTerm, error) {
		var res []weightedTerm
		for i := range terms {
			t, err := parseAffinityTerm(pod, &terms[i].PodAffinityTerm)
			if err != nil {
				return nil, fmt.Errorf("spec.affinity.%s.preferredDuringSchedulingIgnoredDuringExecution[%d].podAffinityTerm.%w", field, i, err)
			}
			res = append(res, weightedTerm{affinityTerm: t, Weight: terms[i].Weight})
		}
		return res, nil
	}
	var err error
	if pa := a.PodAffinity; pa != nil {
		if out.RequiredAffinity, err = required("podAffinity", pa.RequiredDuringSchedulingIgnoredDuringExecution); err != nil {
			return podAffinityTerms{}, err
		}
		if out.PreferredAffinity, err = preferred("podAffinity", pa.PreferredDuringSchedulingIgnoredDuringExecution); err != nil {
			return podAffinityTerms{}, err
		}
	}
	if pa := a.PodAntiAffinity; pa != nil {
		if out.RequiredAntiAffinity, err = required("podAntiAffinity", pa.RequiredDuringSchedulingIgnoredDuringExecution); err != nil {
			return podAffinityTerms{}, err
		}
		if out.PreferredAntiAffinity, err = preferred("podAntiAffinity", pa.PreferredDuringSchedulingIgnoredDuringExecution); err != nil {
			return podAffinityTerms{}, err
		}
	}
	return out, nil
}

// hasAny reports whether the pod has any inter-pod affinity or anti-affinity term.
func (t *podAffinityTerms) hasAny() bool {
	return len(t.RequiredAffinity)+len(t.RequiredAntiAffinity)+len(t.PreferredAffinity)+len(t.PreferredAntiAffinity) > 0
}

// resolveNamespaces returns a copy of terms in which a non-empty namespaceSelector is replaced by the
// names of the namespaces it selects now (upstream does this for the incoming pod's terms, so that
// matching an existing pod needs no lookup of that pod's namespace). An empty selector ({}) selects
// every namespace and is kept.
func resolveNamespaces(terms []affinityTerm, lk lookups) []affinityTerm {
	out := make([]affinityTerm, len(terms))
	for i, t := range terms {
		if t.NamespaceSelector != nil && !t.NamespaceSelector.Empty() {
			t.Namespaces = t.Namespaces.Clone()
			t.Namespaces.Insert(lk.namespacesMatching(t.NamespaceSelector)...)
			t.NamespaceSelector = nil
		}
		out[i] = t
	}
	return out
}

func resolveWeightedNamespaces(terms []weightedTerm, lk lookups) []weightedTerm {
	out := make([]weightedTerm, len(terms))
	for i, t := range terms {
		out[i] = weightedTerm{affinityTerm: resolveNamespaces([]affinityTerm{t.affinityTerm}, lk)[0], Weight: t.Weight}
	}
	return out
}

// topologyPair is one topology domain: a node label key and its value.
type topologyPair struct{ Key, Value string }

// topologyCounts counts matching pods per topology domain.
type topologyCounts map[topologyPair]int64

// add counts n pods on node in the domain of key, when the node has that label.
func (m topologyCounts) add(node *v1.Node, key string, n int64) {
	if v, ok := node.Labels[key]; ok {
		m[topologyPair{key, v}] += n
	}
}

// matchesAll reports whether pod matches every one of terms, and terms is not empty (an affinity is
// satisfied only by a single pod that matches all of its terms).
func matchesAll(terms []affinityTerm, pod *v1.Pod) bool {
	if len(terms) == 0 {
		return false
	}
	for i := range terms {
		if !terms[i].matches(pod, nil) {
			return false
		}
	}
	return true
}

// affinityFilter is the InterPodAffinity filter's state for one scheduling cycle (upstream's
// PreFilter): per topology domain, the existing pods that match the incoming pod's required affinity
// (all terms), its required anti-affinity, and the existing pods whose required anti-affinity the
// incoming pod matches.
type affinityFilter struct {
	pod          *v1.Pod
	affinity     []affinityTerm
	antiAffinity []affinityTerm
	affinityCnt  topologyCounts
	antiCnt      topologyCounts
	existingCnt  topologyCounts
}

// newAffinityFilter computes the filter's state over every node of the cycle: O(pods × terms). It
// returns nil when neither the incoming pod nor any existing pod has a required term that concerns it.
func newAffinityFilter(cc *cycleContext) *affinityFilter {
	pod := cc.pod.Pod
	terms := cc.pod.Affinity
	f := &affinityFilter{
		pod:          pod,
		affinity:     resolveNamespaces(terms.RequiredAffinity, cc.lookups),
		antiAffinity: resolveNamespaces(terms.RequiredAntiAffinity, cc.lookups),
		affinityCnt:  topologyCounts{},
		antiCnt:      topologyCounts{},
		existingCnt:  topologyCounts{},
	}
	nsLabels := cc.namespaceLabels()
	incomingHasTerms := len(f.affinity) > 0 || len(f.antiAffinity) > 0
	for _, ni := range cc.nodes {
		node := ni.Node
		for _, existing := range ni.AffinityPods {
			for i := range existing.Affinity.RequiredAntiAffinity {
				t := &existing.Affinity.RequiredAntiAffinity[i]
				if t.matches(pod, nsLabels) {
					f.existingCnt.add(node, t.TopologyKey, 1)
				}
			}
		}
		if !incomingHasTerms {
			continue
		}
		for _, existing := range ni.Pods {
			if matchesAll(f.affinity, existing.Pod) {
				for i := range f.affinity {
					f.affinityCnt.add(node, f.affinity[i].TopologyKey, 1)
				}
			}
			for i := range f.antiAffinity {
				if f.antiAffinity[i].matches(existing.Pod, nil) {
					f.antiCnt.add(node, f.antiAffinity[i].TopologyKey, 1)
				}
			}
		}
	}
	if !incomingHasTerms && len(f.existingCnt) == 0 {
		return nil
	}
	return f
}

// filter checks one node: the incoming pod's required affinity (every term's topology domain on this
// node holds a pod matching all terms — or no pod anywhere matches and the pod matches its own terms,
// so that the first of a group of pods with affinity to each other can be placed), its required
// anti-affinity (no domain of the node holds a pod a term matches), and the existing pods' required
// anti-affinity (no domain of the node holds a pod whose term matches the incoming pod). A node
// without a term's topology label fails an affinity term and passes an anti-affinity term.
func (f *affinityFilter) filter(_ *podInfo, ni *nodeInfo) []string {
	node := ni.Node
	if len(f.affinity) > 0 {
		podsExist := true
		for i := range f.affinity {
			v, ok := node.Labels[f.affinity[i].TopologyKey]
			if !ok {
				return []string{ReasonPodAffinity}
			}
			if f.affinityCnt[topologyPair{f.affinity[i].TopologyKey, v}] <= 0 {
				podsExist = false
			}
		}
		if !podsExist && !(len(f.affinityCnt) == 0 && matchesAll(f.affinity, f.pod)) {
			return []string{ReasonPodAffinity}
		}
	}
	if len(f.antiCnt) > 0 {
		for i := range f.antiAffinity {
			if v, ok := node.Labels[f.antiAffinity[i].TopologyKey]; ok && f.antiCnt[topologyPair{f.antiAffinity[i].TopologyKey, v}] > 0 {
				return []string{ReasonPodAntiAffinity}
			}
		}
	}
	if len(f.existingCnt) > 0 {
		for k, v := range node.Labels {
			if f.existingCnt[topologyPair{k, v}] > 0 {
				return []string{ReasonExistingPodsAntiAffinity}
			}
		}
	}
	return nil
}

// scoreInterPodAffinity scores the feasible nodes by preferred inter-pod (anti-)affinity, both
// directions as upstream: for every existing pod on a node with labels, the incoming pod's preferred
// affinity terms the existing pod matches add their weight to the term's topology domain of that
// node, its preferred anti-affinity terms subtract it; the existing pod's required affinity terms
// the incoming pod matches add hardPodAffinityWeight, its preferred affinity terms add their weight
// and its preferred anti-affinity terms subtract it. A node's raw score is the sum over its domains;
// the scores are then scaled to 0–maxNodeScore by (score − min) / (max − min). Without any such term
// every node scores 0. When the incoming pod has no preferred terms only pods with affinity terms are
// visited.
func scoreInterPodAffinity(cc *cycleContext, feasible []*nodeInfo) []int64 {
	scores := make([]int64, len(feasible))
	pod := cc.pod.Pod
	prefAff := resolveWeightedNamespaces(cc.pod.Affinity.PreferredAffinity, cc.lookups)
	prefAnti := resolveWeightedNamespaces(cc.pod.Affinity.PreferredAntiAffinity, cc.lookups)
	incomingHasTerms := len(prefAff)+len(prefAnti) > 0
	nsLabels := cc.namespaceLabels()
	topo := map[string]map[string]int64{} // topology key → value → score
	add := func(t *affinityTerm, weight int64, target *v1.Pod, targetNS labels.Set, node *v1.Node) {
		if !t.matches(target, targetNS) {
			return
		}
		v, ok := node.Labels[t.TopologyKey]
		if !ok {
			return
		}
		if topo[t.TopologyKey] == nil {
			topo[t.TopologyKey] = map[string]int64{}
		}
		topo[t.TopologyKey][v] += weight
	}
	for _, ni := range cc.nodes {
		node := ni.Node
		if len(node.Labels) == 0 {
			continue
		}
		pods := ni.AffinityPods
		if incomingHasTerms {
			pods = ni.Pods
		}
		for _, existing := range pods {
			for i := range prefAff {
				add(&prefAff[i].affinityTerm, int64(prefAff[i].Weight), existing.Pod, nil, node)
			}
			for i := range prefAnti {
				add(&prefAnti[i].affinityTerm, -int64(prefAnti[i].Weight), existing.Pod, nil, node)
			}
			et := &existing.Affinity
			for i := range et.RequiredAffinity {
				add(&et.RequiredAffinity[i], hardPodAffinityWeight, pod, nsLabels, node)
			}
			for i := range et.PreferredAffinity {
				add(&et.PreferredAffinity[i].affinityTerm, int64(et.PreferredAffinity[i].Weight), pod, nsLabels, node)
			}
			for i := range et.PreferredAntiAffinity {
				add(&et.PreferredAntiAffinity[i].affinityTerm, -int64(et.PreferredAntiAffinity[i].Weight), pod, nsLabels, node)
			}
		}
	}
	if len(topo) == 0 {
		return scores
	}
	minScore, maxScore := int64(math.MaxInt64), int64(math.MinInt64)
	for i, ni := range feasible {
		for k, values := range topo {
			if v, ok := ni.Node.Labels[k]; ok {
				scores[i] += values[v]
			}
		}
		minScore, maxScore = min(minScore, scores[i]), max(maxScore, scores[i])
	}
	for i := range scores {
		if maxScore > minScore {
			scores[i] = int64(float64(maxNodeScore) * float64(scores[i]-minScore) / float64(maxScore-minScore))
		} else {
			scores[i] = 0
		}
	}
	return scores
}
