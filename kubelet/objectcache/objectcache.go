// Package objectcache is the kubelet's watch-based cache of the ConfigMaps and Secrets its pods refer to,
// as upstream's kubelet with configMapAndSecretChangeDetectionStrategy: Watch
// (pkg/kubelet/util/manager/watch_based_manager.go): a pod's registration starts one watch per object it
// names (namespace, field selector metadata.name=<name>, which the Node authorizer allows for objects
// referenced by the node's pods), shared by every pod that names it and stopped when the last of them is
// unregistered. Reads are served from the watch's store instead of a GET per pod sync.
//
// The objects a pod refers to: configMap and secret volumes, the configMap and secret sources of
// projected volumes, env valueFrom configMapKeyRef/secretKeyRef and envFrom of every container (init and
// ephemeral ones included), and imagePullSecrets.
package objectcache

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/nodekit/nodekit/internal/podspec"
)

// SyncTimeout is how long a read waits for a new watch's initial list before it falls back to a GET
// (upstream waits 1 s, then fails the read).
const SyncTimeout = time.Second

type kind string

const (
	configMaps kind = "configmaps"
	secrets    kind = "secrets"
)

type ref struct {
	kind      kind
	namespace string
	name      string
}

// item is one object's watch: its store, the pods that name it, and its stop.
type item struct {
	store  *syncedStore
	pods   map[types.UID]bool
	cancel context.CancelFunc
}

// Manager caches the ConfigMaps and Secrets of the registered pods. Create it with New; it is safe for
// concurrent use. Stop ends every watch.
type Manager struct {
	client kubernetes.Interface
	log    *slog.Logger
	ctx    context.Context
	stop   context.CancelFunc

	mu    sync.Mutex
	items map[ref]*item
	pods  map[types.UID][]ref // what each registered pod names
}

// New returns a Manager that watches through client; log gets one line per watch started or stopped.
func New(client kubernetes.Interface, log *slog.Logger) *Manager {
	ctx, stop := context.WithCancel(context.Background())
	return &Manager{client: client, log: log, ctx: ctx, stop: stop, items: map[ref]*item{}, pods: map[types.UID][]ref{}}
}

// Stop ends every watch; reads afterwards go to the API server.
func (m *Manager) Stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stop()
	for r, it := range m.items {
		it.cancel()
		delete(m.items, r)
	}
	m.pods = map[types.UID][]ref{}
}

// RegisterPod starts a watch for every object pod names that is not watched yet, and drops the pod's
// interest in objects an earlier version of it named and this one does not (idempotent).
func (m *Manager) RegisterPod(pod *v1.Pod) {
	refs := podRefs(pod)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ctx.Err() != nil {
		return
	}
	for _, r := range refs {
		it := m.items[r]
		if it == nil {
			it = m.watch(r)
			m.items[r] = it
		}
		it.pods[pod.UID] = true
	}
	m.release(pod.UID, refs)
	m.pods[pod.UID] = refs
}

// UnregisterPod drops the pod's interest in its objects; a watch no registered pod needs is stopped.
func (m *Manager) UnregisterPod(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.release(uid, nil)
	delete(m.pods, uid)
}

// release drops pod uid from the items it registered before that are not in keep. Called with m.mu held.
func (m *Manager) release(uid types.UID, keep []ref) {
	kept := map[ref]bool{}
	for _, r := range keep {
		kept[r] = true
	}
	for _, r := range m.pods[uid] {
		it := m.items[r]
		if kept[r] || it == nil {
			continue
		}
		delete(it.pods, uid)
		if len(it.pods) == 0 {
			it.cancel()
			delete(m.items, r)
			m.log.Debug("object watch stopped", "kind", r.kind, "namespace", r.namespace, "name", r.name)
		}
	}
}

// watch starts the reflector of r. Called with m.mu held.
func (m *Manager) watch(r ref) *item {
	ctx, cancel := context.WithCancel(m.ctx)
	var lw *cache.ListWatch
	var obj runtime.Object
	switch r.kind {
	case configMaps:
		c := m.client.CoreV1().ConfigMaps(r.namespace)
		obj, lw = &v1.ConfigMap{}, byName(r.name, c.List, c.Watch)
	default:
		c := m.client.CoreV1().Secrets(r.namespace)
		obj, lw = &v1.Secret{}, byName(r.name, c.List, c.Watch)
	}
	store := newSyncedStore()
	reflector := cache.NewReflectorWithOptions(lw, obj, store, cache.ReflectorOptions{Name: fmt.Sprintf("%s %s/%s", r.kind, r.namespace, r.name)})
	go reflector.RunWithContext(ctx)
	m.log.Debug("object watch started", "kind", r.kind, "namespace", r.namespace, "name", r.name)
	return &item{store: store, pods: map[types.UID]bool{}, cancel: cancel}
}

// byName is the ListWatch of list and watch narrowed to the object name (field selector metadata.name).
func byName[L runtime.Object](name string, list func(context.Context, metav1.ListOptions) (L, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error)) *cache.ListWatch {
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return list(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return watchFn(ctx, o)
		},
	}
}

// GetConfigMap returns the ConfigMap namespace/name: from its watch once the watch has listed (waiting
// up to SyncTimeout for that), else from the API server (an object no registered pod names, or a watch
// still listing). A ConfigMap that does not exist is a NotFound error, as a GET's.
func (m *Manager) GetConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error) {
	obj, err := m.get(ctx, ref{configMaps, namespace, name})
	if obj == nil && err == nil {
		return m.client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, err
	}
	return obj.(*v1.ConfigMap), nil
}

// GetSecret is GetConfigMap for Secrets.
func (m *Manager) GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error) {
	obj, err := m.get(ctx, ref{secrets, namespace, name})
	if obj == nil && err == nil {
		return m.client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, err
	}
	return obj.(*v1.Secret), nil
}

// get returns r from its watch's store, a NotFound error when the synced store lacks it, or (nil, nil)
// when there is no synced watch of r to ask.
func (m *Manager) get(ctx context.Context, r ref) (runtime.Object, error) {
	m.mu.Lock()
	it := m.items[r]
	m.mu.Unlock()
	if it == nil {
		return nil, nil
	}
	timer := time.NewTimer(SyncTimeout)
	defer timer.Stop()
	select {
	case <-it.store.synced:
	case <-timer.C:
		return nil, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	obj, exists, err := it.store.GetByKey(r.namespace + "/" + r.name)
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, apierrors.NewNotFound(v1.Resource(string(r.kind)), r.name)
	}
	// The store's object is shared: callers get their own copy.
	return obj.(runtime.Object).DeepCopyObject(), nil
}

// syncedStore is a store whose synced channel closes at the reflector's first Replace (its initial list).
type syncedStore struct {
	cache.Store
	once   sync.Once
	synced chan struct{}
}

func newSyncedStore() *syncedStore {
	return &syncedStore{Store: cache.NewStore(cache.MetaNamespaceKeyFunc), synced: make(chan struct{})}
}

// Replace is cache.Store's, then marks the store synced.
func (s *syncedStore) Replace(list []any, rv string) error {
	err := s.Store.Replace(list, rv)
	s.once.Do(func() { close(s.synced) })
	return err
}

// podRefs lists the ConfigMaps and Secrets pod names, each once (see the package comment).
func podRefs(pod *v1.Pod) []ref {
	seen := map[ref]bool{}
	var out []ref
	add := func(k kind, name string) {
		r := ref{k, pod.Namespace, name}
		if name != "" && !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	podspec.VisitSecretNames(pod, func(name string) { add(secrets, name) })
	podspec.VisitConfigMapNames(pod, func(name string) { add(configMaps, name) })
	return out
}
