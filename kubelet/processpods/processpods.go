// Package processpods is the kubelet's pod source for the component processes nodekit runs directly on
// the node, outside any container: it reads the component records of a trusted directory of the node
// (internal/components: etcd, kube-apiserver, kube-scheduler, kube-controller-manager written by the
// server, kube-proxy by the agent) and keeps one mirror pod per record in kube-system, named
// <component>-<node> as upstream's static control-plane pods are, with upstream's labels
// (component=<name>, tier=control-plane; k8s-app=kube-proxy for the proxy). The kubelet never runs these
// pods: their status reports the process — Running, and Ready while its PID is alive, restartCount the
// record's restarts, containerID process://<pid> — and `kubectl logs` reads the record's log file
// (LogFile, served by the kubelet server).
//
// As with static pods (kubelet/static, upstream's mirror client), a mirror pod deleted through the API is
// recreated at the next sync, one whose record changed (its command line) is replaced, and one whose
// record is gone is deleted. Only records read from the directory decide which host file is served as
// a pod's log: nothing an API client can set on a pod (annotations, spec) does.
package processpods

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit/internal/components"
	"github.com/nodekit/nodekit/kubelet/static"
	"github.com/nodekit/nodekit/version"
)

// Source is the config.source annotation of these mirror pods (upstream's sources are file, http, api).
const Source = "process"

// ContainerIDPrefix is the scheme of the containerID of a process pod's container: process://<pid>.
const ContainerIDPrefix = "process://"

// Config configures a Pods source. Dir, NodeName and Client are required.
type Config struct {
	// Dir is the component records directory (internal/components); missing: no pods.
	Dir      string
	NodeName string
	Client   kubernetes.Interface
	// Period is how often the records are re-read and the mirror pods reconciled (default 5 s).
	Period time.Duration
	Logger *slog.Logger
}

// Pods keeps the mirror pods of Dir's records. Create it with New and run it with Run.
type Pods struct {
	cfg     Config
	log     *slog.Logger
	nodeUID types.UID
	nodeIP  string

	mu   sync.RWMutex
	logs map[string]string // pod name -> log file, from the last records read
}

// New validates cfg and fills defaults.
func New(cfg Config) (*Pods, error) {
	if cfg.Dir == "" || cfg.NodeName == "" || cfg.Client == nil {
		return nil, errors.New("process pods: Dir, NodeName and Client are required")
	}
	if cfg.Period <= 0 {
		cfg.Period = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Pods{cfg: cfg, log: cfg.Logger.With("node", cfg.NodeName, "source", Source), logs: map[string]string{}}, nil
}

// Run syncs every Period until ctx ends (the Node must exist: it owns the mirror pods); it returns
// ctx's error.
func (s *Pods) Run(ctx context.Context) error {
	t := time.NewTicker(s.cfg.Period)
	defer t.Stop()
	for {
		if err := s.Sync(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("process pods sync failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// LogFile returns the log file of container in pod namespace/name when that is the mirror pod of a
// component record (the container name may be empty, for the pod's only container), else false. The
// answer comes from the records only (see the package doc).
func (s *Pods) LogFile(namespace, name, container string) (string, bool) {
	if namespace != metav1.NamespaceSystem {
		return "", false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	path, ok := s.logs[name]
	if !ok || (container != "" && PodName(container, s.cfg.NodeName) != name) {
		return "", false
	}
	return path, true
}

// PodName is the mirror pod name of component on node.
func PodName(component, node string) string { return component + "-" + strings.ToLower(node) }

// Sync reads the records once and reconciles the mirror pods: missing ones created, changed or
// terminating ones recreated, statuses written when they differ, orphans of this source deleted.
// Rejected records are logged (one line each) and skipped.
func (s *Pods) Sync(ctx context.Context) error {
	recs, errs := components.Read(s.cfg.Dir)
	for _, err := range errs {
		s.log.Error("component record rejected", "err", err)
	}
	logs := map[string]string{}
	for _, r := range recs {
		logs[PodName(r.Name, s.cfg.NodeName)] = r.LogFile
	}
	s.mu.Lock()
	s.logs = logs
	s.mu.Unlock()
	if s.nodeUID == "" {
		n, err := s.cfg.Client.CoreV1().Nodes().Get(ctx, s.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get node for mirror pod owner: %w", err)
		}
		s.nodeUID = n.UID
		for _, a := range n.Status.Addresses {
			if a.Type == v1.NodeInternalIP {
				s.nodeIP = a.Address
				break
			}
		}
	}
	list, err := s.cfg.Client.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + s.cfg.NodeName})
	if err != nil {
		return fmt.Errorf("list pods on node: %w", err)
	}
	existing := map[string]*v1.Pod{}
	for i := range list.Items {
		existing[list.Items[i].Name] = &list.Items[i]
	}
	var out []error
	want := map[string]bool{}
	for _, r := range recs {
		p := MirrorPod(r, s.cfg.NodeName, s.nodeUID)
		want[p.Name] = true
		if err := s.syncOne(ctx, r, p, existing[p.Name]); err != nil {
			out = append(out, err)
		}
	}
	for name, p := range existing {
		if !want[name] && p.Annotations[static.ConfigSourceAnnotation] == Source {
			if err := s.delete(ctx, p); err != nil {
				out = append(out, err)
			}
		}
	}
	return errors.Join(out...)
}

func (s *Pods) syncOne(ctx context.Context, r components.Record, want, m *v1.Pod) error {
	key := want.Namespace + "/" + want.Name
	switch {
	case m == nil:
	case m.Annotations[v1.MirrorPodAnnotationKey] == "":
		return fmt.Errorf("mirror pod %s: a pod that is not a mirror pod holds the name", key)
	case m.DeletionTimestamp == nil && m.Annotations[static.ConfigHashAnnotation] == want.Annotations[static.ConfigHashAnnotation] &&
		apiequality.Semantic.DeepEqual(m.OwnerReferences, want.OwnerReferences):
	default:
		if err := s.delete(ctx, m); err != nil {
			return err
		}
		m = nil
	}
	if m == nil {
		created, err := s.cfg.Client.CoreV1().Pods(want.Namespace).Create(ctx, want, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create mirror pod %s: %w", key, err)
		}
		s.log.Info("mirror pod created", "pod", key, "pid", r.PID)
		m = created
	}
	st := Status(r, r.Alive(), s.nodeIP)
	st.QOSClass = m.Status.QOSClass
	if apiequality.Semantic.DeepEqual(m.Status, st) {
		return nil
	}
	m = m.DeepCopy()
	m.Status = st
	if _, err := s.cfg.Client.CoreV1().Pods(m.Namespace).UpdateStatus(ctx, m, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update status of mirror pod %s: %w", key, err)
	}
	return nil
}

// delete deletes mirror pod m (static.DeleteMirror) and logs it.
func (s *Pods) delete(ctx context.Context, m *v1.Pod) error {
	if err := static.DeleteMirror(ctx, s.cfg.Client, m); err != nil {
		return err
	}
	s.log.Info("mirror pod deleted", "pod", m.Namespace+"/"+m.Name)
	return nil
}

// Image is the image field of a process pod's container: no image is pulled or run, it names the
// nodekit build the process runs from.
var Image = "nodekit:" + version.KubernetesVersion

// MirrorPod returns the mirror pod of record r on node (owned by the Node with nodeUID): kube-system,
// PodName, upstream's labels, host network, one container named after the component with the
// process's command line, tolerating every NoExecute taint; config.hash and config.mirror are a hash of
// the spec (so a changed command line replaces the pod).
func MirrorPod(r components.Record, node string, nodeUID types.UID) *v1.Pod {
	node = strings.ToLower(node)
	labels := map[string]string{"component": r.Name, "tier": "control-plane"}
	if r.Name == components.Proxy {
		labels = map[string]string{"k8s-app": components.Proxy, "component": r.Name, "tier": "node"}
	}
	controller := true
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: PodName(r.Name, node), Namespace: metav1.NamespaceSystem, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node, UID: nodeUID, Controller: &controller}}},
		Spec: v1.PodSpec{NodeName: node, HostNetwork: true, RestartPolicy: v1.RestartPolicyAlways,
			Containers:  []v1.Container{{Name: r.Name, Image: Image, Command: r.Command, ImagePullPolicy: v1.PullNever}},
			Tolerations: []v1.Toleration{{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}}},
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s", node, r.Name, strings.Join(r.Command, "\x00"))
	hash := hex.EncodeToString(h.Sum(nil))[:32]
	p.Annotations = map[string]string{static.ConfigSourceAnnotation: Source, static.ConfigHashAnnotation: hash, v1.MirrorPodAnnotationKey: hash}
	return p
}

// Status is the pod status of record r's process: Running; Ready, ContainersReady and the container
// running since r.StartTime while alive; otherwise not ready, the container waiting (CrashLoopBackOff:
// its supervisor restarts it). hostIP and podIP are nodeIP (host network).
func Status(r components.Record, alive bool, nodeIP string) v1.PodStatus {
	start := metav1.NewTime(r.StartTime)
	ready := v1.ConditionFalse
	cs := v1.ContainerStatus{Name: r.Name, Image: Image, RestartCount: r.Restarts, Ready: alive, Started: &alive,
		ContainerID: ContainerIDPrefix + strconv.Itoa(r.PID)}
	if alive {
		ready = v1.ConditionTrue
		cs.State.Running = &v1.ContainerStateRunning{StartedAt: start}
	} else {
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
			Message: fmt.Sprintf("process %d exited; its supervisor restarts it", r.PID)}
	}
	cond := func(t v1.PodConditionType, s v1.ConditionStatus) v1.PodCondition {
		return v1.PodCondition{Type: t, Status: s, LastTransitionTime: start}
	}
	st := v1.PodStatus{Phase: v1.PodRunning, StartTime: &start, HostIP: nodeIP, PodIP: nodeIP,
		Conditions: []v1.PodCondition{cond(v1.PodReadyToStartContainers, v1.ConditionTrue), cond(v1.PodInitialized, v1.ConditionTrue),
			cond(v1.PodReady, ready), cond(v1.ContainersReady, ready), cond(v1.PodScheduled, v1.ConditionTrue)},
		ContainerStatuses: []v1.ContainerStatus{cs}}
	if nodeIP != "" {
		st.HostIPs = []v1.HostIP{{IP: nodeIP}}
		st.PodIPs = []v1.PodIP{{IP: nodeIP}}
	}
	return st
}
