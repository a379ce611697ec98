package flowcontrol

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	flowcontrolclient "k8s.io/client-go/kubernetes/typed/flowcontrol/v1"

	"github.com/nodekit/nodekit/controlplane/apiserver/defaults"
)

// object is a FlowSchema or a PriorityLevelConfiguration.
type object interface {
	*flowcontrolv1.FlowSchema | *flowcontrolv1.PriorityLevelConfiguration
	metav1.Object
}

// client is client-go's typed client of one of the two kinds (L its list type).
type client[T object, L any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
}

// kind is what Ensure needs of one of the two kinds.
type kind[T object, L any] struct {
	api   client[T, L]
	items func(L) []T
	// sameSpec compares bootstrap's (defaulted) spec with current's; setSpec copies bootstrap's onto obj.
	sameSpec func(bootstrap, current T) bool
	setSpec  func(obj, bootstrap T)
	copy     func(T) T
}

// Ensure keeps the bootstrap API Priority and Fairness configuration as kube-apiserver does: every
// mandatory and suggested PriorityLevelConfiguration and FlowSchema of k8s.io/apiserver's bootstrap set
// is created when missing; a mandatory one's spec is put back when changed; a suggested one's only while
// it is annotated apf.kubernetes.io/autoupdate-spec=true (or carries no valid annotation and was never
// edited, generation 1), the annotation set to the choice made; and an object annotated
// autoupdate-spec=true that the bootstrap set no longer has is deleted. It returns the first error.
func Ensure(ctx context.Context, c flowcontrolclient.FlowcontrolV1Interface) error {
	pls := plKind(c)
	if err := ensureAll(ctx, pls, bootstrap.MandatoryPriorityLevelConfigurations, true); err != nil {
		return err
	}
	if err := ensureAll(ctx, pls, bootstrap.SuggestedPriorityLevelConfigurations, false); err != nil {
		return err
	}
	fss := fsKind(c)
	if err := ensureAll(ctx, fss, bootstrap.MandatoryFlowSchemas, true); err != nil {
		return err
	}
	if err := ensureAll(ctx, fss, bootstrap.SuggestedFlowSchemas, false); err != nil {
		return err
	}
	if err := removeUnwanted(ctx, pls, append(append([]*flowcontrolv1.PriorityLevelConfiguration{}, bootstrap.MandatoryPriorityLevelConfigurations...), bootstrap.SuggestedPriorityLevelConfigurations...)); err != nil {
		return err
	}
	return removeUnwanted(ctx, fss, append(append([]*flowcontrolv1.FlowSchema{}, bootstrap.MandatoryFlowSchemas...), bootstrap.SuggestedFlowSchemas...))
}

func ensureAll[T object, L any](ctx context.Context, k kind[T, L], boots []T, mandatory bool) error {
	for _, b := range boots {
		if err := ensureOne(ctx, k, b, mandatory); err != nil {
			return fmt.Errorf("apf bootstrap %s: %w", b.GetName(), err)
		}
	}
	return nil
}

func ensureOne[T object, L any](ctx context.Context, k kind[T, L], boot T, mandatory bool) error {
	cur, err := k.api.Get(ctx, boot.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		obj := k.copy(boot)
		setAutoUpdate(obj, true)
		if _, err := k.api.Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		slog.Info("apf bootstrap object created", "name", boot.GetName(), "mandatory", mandatory)
		return nil
	}
	if err != nil {
		return err
	}
	auto := mandatory || wantsAutoUpdate(cur)
	annotate := cur.GetAnnotations()[flowcontrolv1.AutoUpdateAnnotationKey] != strconv.FormatBool(auto)
	specChanged := auto && !k.sameSpec(boot, cur)
	if !annotate && !specChanged {
		return nil
	}
	obj := k.copy(cur)
	if specChanged {
		k.setSpec(obj, boot)
	}
	setAutoUpdate(obj, auto)
	if _, err := k.api.Update(ctx, obj, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
		return err
	}
	slog.Info("apf bootstrap object revised", "name", boot.GetName(), "specRestored", specChanged, "autoUpdate", auto)
	return nil
}

// wantsAutoUpdate is upstream's shouldUpdateSpec: the annotation's boolean, else whether the object was
// never edited (generation 1).
func wantsAutoUpdate(o metav1.Object) bool {
	if v, err := strconv.ParseBool(o.GetAnnotations()[flowcontrolv1.AutoUpdateAnnotationKey]); err == nil {
		return v
	}
	return o.GetGeneration() == 1
}

func setAutoUpdate(o metav1.Object, v bool) {
	a := o.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[flowcontrolv1.AutoUpdateAnnotationKey] = strconv.FormatBool(v)
	o.SetAnnotations(a)
}

func removeUnwanted[T object, L any](ctx context.Context, k kind[T, L], boots []T) error {
	want := map[string]bool{}
	for _, b := range boots {
		want[b.GetName()] = true
	}
	list, err := k.api.List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, o := range k.items(list) {
		name := o.GetName()
		if want[name] {
			continue
		}
		if v, err := strconv.ParseBool(o.GetAnnotations()[flowcontrolv1.AutoUpdateAnnotationKey]); err != nil || !v {
			continue
		}
		if err := k.api.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		slog.Info("apf bootstrap object removed", "name", name)
	}
	return nil
}

func plKind(c flowcontrolclient.FlowcontrolV1Interface) kind[*flowcontrolv1.PriorityLevelConfiguration, *flowcontrolv1.PriorityLevelConfigurationList] {
	type T = *flowcontrolv1.PriorityLevelConfiguration
	return kind[T, *flowcontrolv1.PriorityLevelConfigurationList]{
		api: c.PriorityLevelConfigurations(),
		items: func(l *flowcontrolv1.PriorityLevelConfigurationList) (out []T) {
			for i := range l.Items {
				out = append(out, &l.Items[i])
			}
			return out
		},
		sameSpec: func(b, cur T) bool {
			d := b.DeepCopy()
			defaults.PriorityLevelConfiguration(d)
			return apiequality.Semantic.DeepEqual(d.Spec, cur.Spec)
		},
		setSpec: func(o, b T) { o.Spec = *b.Spec.DeepCopy() },
		copy:    func(o T) T { return o.DeepCopy() },
	}
}

func fsKind(c flowcontrolclient.FlowcontrolV1Interface) kind[*flowcontrolv1.FlowSchema, *flowcontrolv1.FlowSchemaList] {
	type T = *flowcontrolv1.FlowSchema
	return kind[T, *flowcontrolv1.FlowSchemaList]{
		api: c.FlowSchemas(),
		items: func(l *flowcontrolv1.FlowSchemaList) (out []T) {
			for i := range l.Items {
				out = append(out, &l.Items[i])
			}
			return out
		},
		sameSpec: func(b, cur T) bool {
			d := b.DeepCopy()
			defaults.FlowSchema(d)
			return apiequality.Semantic.DeepEqual(d.Spec, cur.Spec)
		},
		setSpec: func(o, b T) { o.Spec = *b.Spec.DeepCopy() },
		copy:    func(o T) T { return o.DeepCopy() },
	}
}
