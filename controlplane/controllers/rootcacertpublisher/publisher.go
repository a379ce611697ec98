// Package rootcacertpublisher is the root CA certificate publisher: every namespace gets a ConfigMap
// named "kube-root-ca.crt" whose "ca.crt" key holds the CA bundle that verifies the API server,
// created when the namespace appears and restored when it is deleted or edited, never created in a
// terminating namespace (kube-controller-manager's root-ca-cert-publisher). Projected
// service-account token volumes read their ca.crt from it, and the e2e framework waits for it in every
// test namespace.
package rootcacertpublisher

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodekit/nodekit/controlplane/controllers/internal/nsutil"
	"github.com/nodekit/nodekit/controlplane/controllers/workloop"
)

const (
	// ConfigMapName is the ConfigMap published in every namespace.
	ConfigMapName = "kube-root-ca.crt"
	// DataKey is the ConfigMap key that holds the PEM CA bundle.
	DataKey = "ca.crt"
	// DescriptionAnnotation is the annotation that says what the ConfigMap is for.
	DescriptionAnnotation = "kubernetes.io/description"
	// Description is DescriptionAnnotation's value (upstream's text).
	Description = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. " +
		"No other usage is guaranteed across distributions of Kubernetes clusters."
)

// Publisher is the controller. Queue keys are namespace names.
type Publisher struct {
	client     kubernetes.Interface
	rootCA     string
	nsLister   corelisters.NamespaceLister
	configMaps cache.SharedIndexInformer
	cmLister   corelisters.ConfigMapLister
	*workloop.Loop
}

// New returns the publisher of rootCA (a PEM bundle, not checked beyond being non-empty). It registers
// on factory's namespace informer and keeps its own informer on the kube-root-ca.crt ConfigMaps only
// (a field selector on the name, so no other ConfigMap is cached); Run starts that informer.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, rootCA []byte, resync time.Duration, log *slog.Logger) (*Publisher, error) {
	if len(rootCA) == 0 {
		return nil, fmt.Errorf("root-ca-cert-publisher: no root CA certificate")
	}
	cms := coreinformers.NewFilteredConfigMapInformer(client, metav1.NamespaceAll, resync,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", ConfigMapName).String()
		})
	p := &Publisher{
		client:     client,
		rootCA:     string(rootCA),
		nsLister:   factory.Core().V1().Namespaces().Lister(),
		configMaps: cms,
		cmLister:   corelisters.NewConfigMapLister(cms.GetIndexer()),
	}
	p.Loop = workloop.New("root-ca-cert-publisher", p.reconcile, log)
	if _, err := factory.Core().V1().Namespaces().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: p.Enqueue,
		UpdateFunc: func(_, obj any) {
			if ns, ok := obj.(*v1.Namespace); ok && ns.Status.Phase != v1.NamespaceTerminating {
				p.Enqueue(obj)
			}
		},
	}); err != nil {
		return nil, err
	}
	onConfigMap := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if cm, ok := obj.(*v1.ConfigMap); ok && cm.Name == ConfigMapName {
			p.Add(cm.Namespace)
		}
	}
	if _, err := cms.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onConfigMap,
		UpdateFunc: func(_, obj any) { onConfigMap(obj) },
		DeleteFunc: onConfigMap,
	}); err != nil {
		return nil, err
	}
	return p, nil
}

// Run runs the ConfigMap informer and workers until ctx is done.
func (p *Publisher) Run(ctx context.Context, workers int) {
	go p.configMaps.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), p.configMaps.HasSynced) {
		return
	}
	p.Loop.Run(ctx, workers)
}

// wanted reports whether cm already holds the bundle and the description.
func (p *Publisher) wanted(cm *v1.ConfigMap) bool {
	return maps.Equal(cm.Data, map[string]string{DataKey: p.rootCA}) && len(cm.BinaryData) == 0 &&
		cm.Annotations[DescriptionAnnotation] != ""
}

func (p *Publisher) reconcile(ctx context.Context, nsName string) error {
	if _, active, err := nsutil.Active(p.nsLister, nsName); !active {
		return err
	}
	cm, err := p.cmLister.ConfigMaps(nsName).Get(ConfigMapName)
	if apierrors.IsNotFound(err) {
		return p.create(ctx, nsName)
	}
	if err != nil {
		return err
	}
	if p.wanted(cm) {
		return nil
	}
	cm = cm.DeepCopy()
	cm.Data = map[string]string{DataKey: p.rootCA}
	cm.BinaryData = nil
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[DescriptionAnnotation] = Description
	if _, err := p.client.CoreV1().ConfigMaps(nsName).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			// Deleted meanwhile: the delete event queues the namespace again.
			return nil
		}
		return fmt.Errorf("update configmap %s/%s: %w", nsName, ConfigMapName, err)
	}
	p.Log().Info("restored root CA configmap", "namespace", nsName)
	return nil
}

func (p *Publisher) create(ctx context.Context, nsName string) error {
	cm := &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName, Namespace: nsName,
			Annotations: map[string]string{DescriptionAnnotation: Description}},
		Data: map[string]string{DataKey: p.rootCA},
	}
	_, err := p.client.CoreV1().ConfigMaps(nsName).Create(ctx, cm, metav1.CreateOptions{})
	switch {
	case err == nil:
		p.Log().Info("published root CA configmap", "namespace", nsName)
		return nil
	case apierrors.IsAlreadyExists(err) || nsutil.Gone(err):
		// Already there (its informer event requeues the namespace if it needs fixing), or the
		// namespace is going away.
		return nil
	default:
		return fmt.Errorf("create configmap %s/%s: %w", nsName, ConfigMapName, err)
	}
}
