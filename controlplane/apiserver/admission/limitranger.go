package admission

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/initializer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// LimitRangerAnnotation lists, on a pod, the requests and limits LimitRanger filled in.
const LimitRangerAnnotation = "kubernetes.io/limit-ranger"

// LimitRanger is Kubernetes' LimitRanger admission plugin for pods, driven by the LimitRanges of the
// pod's namespace. On create it first fills each container's and init container's missing limits from
// the Container items' default and missing requests from their defaultRequest (and names what it filled
// in the kubernetes.io/limit-ranger annotation), then refuses (403) a pod breaking any item: for type
// Container each container's min, max and maxLimitRequestRatio, for type Pod the same on the pod's
// summed requests and limits (init containers counted as the scheduler does), with upstream's messages
// ("minimum cpu usage per Container is 100m, but request is 50m", "maximum memory usage per Container is
// 1Gi, but limit is 2Gi", ...). PersistentVolumeClaim items are not enforced on pods.
//
// LimitRanges are read from the shared informer's cache; when the cache holds none for the namespace
// they are listed live (that answer kept for liveTTL, as upstream's), so a LimitRange made just before a
// pod applies to it.
type LimitRanger struct {
	client kubernetes.Interface
	ranges corelisters.LimitRangeLister

	mu   sync.Mutex
	live map[string]liveRanges
	now  func() time.Time
}

// liveTTL is how long a live listing of a namespace's LimitRanges is reused.
const liveTTL = 30 * time.Second

type liveRanges struct {
	ranges  []*corev1.LimitRange
	expires time.Time
}

// NewLimitRanger returns the plugin; the admission initializers give it its client and informers.
func NewLimitRanger() *LimitRanger {
	return &LimitRanger{live: map[string]liveRanges{}, now: time.Now}
}

var (
	_ admission.MutationInterface                  = &LimitRanger{}
	_ admission.ValidationInterface                = &LimitRanger{}
	_ initializer.WantsExternalKubeClientSet       = &LimitRanger{}
	_ initializer.WantsExternalKubeInformerFactory = &LimitRanger{}
	_ admission.InitializationValidator            = &LimitRanger{}
)

// SetExternalKubeClientSet implements initializer.WantsExternalKubeClientSet.
func (p *LimitRanger) SetExternalKubeClientSet(c kubernetes.Interface) { p.client = c }

// SetExternalKubeInformerFactory implements initializer.WantsExternalKubeInformerFactory.
func (p *LimitRanger) SetExternalKubeInformerFactory(f informers.SharedInformerFactory) {
	p.ranges = f.Core().V1().LimitRanges().Lister()
}

// ValidateInitialization implements admission.InitializationValidator.
func (p *LimitRanger) ValidateInitialization() error {
	if p.client == nil || p.ranges == nil {
		return fmt.Errorf("LimitRanger admission: missing client or informers")
	}
	return nil
}

// Handles pod creation.
func (p *LimitRanger) Handles(op admission.Operation) bool { return op == admission.Create }

// Admit fills in the Container items' defaults.
func (p *LimitRanger) Admit(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	pod := podOf(a)
	if pod == nil || a.GetOperation() != admission.Create {
		return nil
	}
	ranges, err := p.list(ctx, a.GetNamespace())
	if err != nil {
		return admission.NewForbidden(a, fmt.Errorf("error listing LimitRanges of namespace %s: %w", a.GetNamespace(), err))
	}
	for _, lr := range ranges {
		ApplyLimitRangeDefaults(lr, pod)
	}
	return nil
}

// Validate enforces every LimitRange of the namespace on the pod.
func (p *LimitRanger) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	pod := podOf(a)
	if pod == nil || a.GetOperation() != admission.Create {
		return nil
	}
	ranges, err := p.list(ctx, a.GetNamespace())
	if err != nil {
		return admission.NewForbidden(a, fmt.Errorf("error listing LimitRanges of namespace %s: %w", a.GetNamespace(), err))
	}
	var errs []error
	for _, lr := range ranges {
		if err := CheckLimitRange(lr, pod); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return admission.NewForbidden(a, utilerrors.NewAggregate(errs))
	}
	return nil
}

func (p *LimitRanger) list(ctx context.Context, namespace string) ([]*corev1.LimitRange, error) {
	ranges, err := p.ranges.LimitRanges(namespace).List(labels.Everything())
	if err != nil || len(ranges) > 0 {
		return ranges, err
	}
	now := p.now()
	p.mu.Lock()
	c, ok := p.live[namespace]
	p.mu.Unlock()
	if ok && now.Before(c.expires) {
		return c.ranges, nil
	}
	live, err := p.client.CoreV1().LimitRanges(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range live.Items {
		ranges = append(ranges, &live.Items[i])
	}
	p.mu.Lock()
	for ns, c := range p.live { // keep the map small: drop what expired
		if !now.Before(c.expires) {
			delete(p.live, ns)
		}
	}
	p.live[namespace] = liveRanges{ranges: ranges, expires: now.Add(liveTTL)}
	p.mu.Unlock()
	return ranges, nil
}

// ApplyLimitRangeDefaults sets, in every container and init container of pod, each limit the
// LimitRange's Container items default and each request they defaultRequest that the container
// leaves unset, and records what it set in the kubernetes.io/limit-ranger annotation.
func ApplyLimitRangeDefaults(lr *corev1.LimitRange, pod *corev1.Pod) {
	limits, requests := corev1.ResourceList{}, corev1.ResourceList{}
	for _, item := range lr.Spec.Limits {
		if item.Type != corev1.LimitTypeContainer {
			continue
		}
		for k, v := range item.Default {
			limits[k] = v.DeepCopy()
		}
		for k, v := range item.DefaultRequest {
			requests[k] = v.DeepCopy()
		}
	}
	var notes []string
	fill := func(cs []corev1.Container, kind string) {
		for i := range cs {
			r := &cs[i].Resources
			if set := fillMissing(&r.Limits, limits); len(set) > 0 {
				notes = append(notes, strings.Join(set, ", ")+" limit for "+kind+" "+cs[i].Name)
			}
			if set := fillMissing(&r.Requests, requests); len(set) > 0 {
				notes = append(notes, strings.Join(set, ", ")+" request for "+kind+" "+cs[i].Name)
			}
		}
	}
	fill(pod.Spec.Containers, "container")
	fill(pod.Spec.InitContainers, "init container")
	if len(notes) > 0 {
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[LimitRangerAnnotation] = "LimitRanger plugin set: " + strings.Join(notes, "; ")
	}
}

// fillMissing copies the entries of from that *to lacks and returns their names, sorted.
func fillMissing(to *corev1.ResourceList, from corev1.ResourceList) []string {
	var set []string
	for k, v := range from {
		if _, ok := (*to)[k]; ok {
			continue
		}
		if *to == nil {
			*to = corev1.ResourceList{}
		}
		(*to)[k] = v.DeepCopy()
		set = append(set, string(k))
	}
	sort.Strings(set)
	return set
}

// CheckLimitRange returns every way pod breaks the LimitRange's Container and Pod items (nil if none),
// one error per resource and bound, in upstream's words.
func CheckLimitRange(lr *corev1.LimitRange, pod *corev1.Pod) error {
	var errs []error
	check := func(typ corev1.LimitType, item corev1.LimitRangeItem, requests, limits corev1.ResourceList) {
		kind := string(typ)
		for _, k := range sortedNames(item.Min) {
			errs = append(errs, minConstraint(kind, k, item.Min[k], requests, limits))
		}
		for _, k := range sortedNames(item.Max) {
			errs = append(errs, maxConstraint(kind, k, item.Max[k], requests, limits))
		}
		for _, k := range sortedNames(item.MaxLimitRequestRatio) {
			errs = append(errs, ratioConstraint(kind, k, item.MaxLimitRequestRatio[k], requests, limits))
		}
	}
	for _, item := range lr.Spec.Limits {
		switch item.Type {
		case corev1.LimitTypeContainer:
			for _, c := range pod.Spec.Containers {
				check(item.Type, item, c.Resources.Requests, c.Resources.Limits)
			}
			for _, c := range pod.Spec.InitContainers {
				check(item.Type, item, c.Resources.Requests, c.Resources.Limits)
			}
		case corev1.LimitTypePod:
			opts := resourcehelper.PodResourcesOptions{ExcludeOverhead: true}
			check(item.Type, item, resourcehelper.PodRequests(pod, opts), resourcehelper.PodLimits(pod, opts))
		}
	}
	return utilerrors.NewAggregate(errs) // drops the nils
}

func sortedNames(l corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(l))
	for k := range l {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	return names
}

// values compares in milli-units unless a value is too large for them, as upstream does.
func values(req, lim, enforced resource.Quantity) (r, l, e int64) {
	r, l, e = req.Value(), lim.Value(), enforced.Value()
	if r <= resource.MaxMilliValue && l <= resource.MaxMilliValue && e <= resource.MaxMilliValue {
		r, l, e = req.MilliValue(), lim.MilliValue(), enforced.MilliValue()
	}
	return r, l, e
}

func minConstraint(kind string, name corev1.ResourceName, enforced resource.Quantity, requests, limits corev1.ResourceList) error {
	req, hasReq := requests[name]
	lim, hasLim := limits[name]
	r, l, e := values(req, lim, enforced)
	switch {
	case !hasReq:
		return fmt.Errorf("minimum %s usage per %s is %s.  No request is specified", name, kind, enforced.String())
	case r < e:
		return fmt.Errorf("minimum %s usage per %s is %s, but request is %s", name, kind, enforced.String(), req.String())
	case hasLim && l < e:
		return fmt.Errorf("minimum %s usage per %s is %s, but limit is %s", name, kind, enforced.String(), lim.String())
	}
	return nil
}

func maxConstraint(kind string, name corev1.ResourceName, enforced resource.Quantity, requests, limits corev1.ResourceList) error {
	req, hasReq := requests[name]
	lim, hasLim := limits[name]
	r, l, e := values(req, lim, enforced)
	switch {
	case !hasLim:
		return fmt.Errorf("maximum %s usage per %s is %s.  No limit is specified", name, kind, enforced.String())
	case l > e:
		return fmt.Errorf("maximum %s usage per %s is %s, but limit is %s", name, kind, enforced.String(), lim.String())
	case hasReq && r > e:
		return fmt.Errorf("maximum %s usage per %s is %s, but request is %s", name, kind, enforced.String(), req.String())
	}
	return nil
}

func ratioConstraint(kind string, name corev1.ResourceName, enforced resource.Quantity, requests, limits corev1.ResourceList) error {
	req, hasReq := requests[name]
	lim, hasLim := limits[name]
	r, l, _ := values(req, lim, enforced)
	if !hasReq || r == 0 {
		return fmt.Errorf("%s max limit to request ratio per %s is %s, but no request is specified or request is 0", name, kind, enforced.String())
	}
	if !hasLim || l == 0 {
		return fmt.Errorf("%s max limit to request ratio per %s is %s, but no limit is specified or limit is 0", name, kind, enforced.String())
	}
	ratio := float64(l) / float64(r)
	observed, allowed := ratio, float64(enforced.Value())
	if enforced.Value() <= resource.MaxMilliValue {
		observed, allowed = ratio*1000, float64(enforced.MilliValue())
	}
	if observed > allowed {
		return fmt.Errorf("%s max limit to request ratio per %s is %s, but provided ratio is %f", name, kind, enforced.String(), ratio)
	}
	return nil
}
