// Package status is the kubelet's status manager: it computes a pod's API status from its runtime
// state (Generate) and writes it through the pods/status subresource only when it changed; for a
// deleted pod whose containers have all stopped it completes the deletion (delete with grace period 0
// and a UID precondition), as upstream's status manager does. Run reconciles the API's copy of each pod
// status with what the kubelet knows (every ReconcilePeriod and on watch updates) and writes it again
// when someone else overwrote it.
package status

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Annotations that mark static and mirror pods (upstream's kubetypes).
const (
	ConfigSourceAnnotation = "kubernetes.io/config.source"
	ConfigMirrorAnnotation = "kubernetes.io/config.mirror"
)

// IsStatic reports whether the pod comes from a file or URL source rather than the API.
func IsStatic(pod *v1.Pod) bool {
	s := pod.Annotations[ConfigSourceAnnotation]
	return s != "" && s != "api"
}

// Manager caches the last status of every pod, writes changes to the API and (Run) reconciles the
// API's copy with the cache: a status someone else overwrote (e.g. the node lifecycle controller's
// Ready=False while the node was silent) is written again.
type Manager struct {
	client kubernetes.Interface
	log    *slog.Logger

	mu       sync.Mutex
	statuses map[types.UID]v1.PodStatus
	// locks serialize the writes of each pod, so that a reconcile never lands an older status after a
	// newer one.
	locks   map[types.UID]*sync.Mutex
	pending map[types.UID]bool // pods to reconcile now (Notify)
	wake    chan struct{}
}

// NewManager returns a status manager writing through client.
func NewManager(client kubernetes.Interface, log *slog.Logger) *Manager {
	return &Manager{client: client, log: log, statuses: map[types.UID]v1.PodStatus{},
		locks: map[types.UID]*sync.Mutex{}, pending: map[types.UID]bool{}, wake: make(chan struct{}, 1)}
}

// lockPod takes the pod's write lock and returns its release.
func (m *Manager) lockPod(uid types.UID) func() {
	m.mu.Lock()
	l := m.locks[uid]
	if l == nil {
		l = &sync.Mutex{}
		m.locks[uid] = l
	}
	m.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// GetPodStatus returns the last status set for the pod.
func (m *Manager) GetPodStatus(uid types.UID) (v1.PodStatus, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.statuses[uid]
	return *s.DeepCopy(), ok
}

// RemovePod forgets the pod.
func (m *Manager) RemovePod(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.statuses, uid)
	delete(m.locks, uid)
	delete(m.pending, uid)
}

func equal(a, b *v1.PodStatus) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// SetPodStatus records status for pod and, when it differs from what the API has (pod.Status as the
// caller last saw it, or the last status written), writes it through the pods/status subresource with
// one JSON merge patch carrying the pod's UID as a precondition (as upstream's status manager does: a
// pod replaced by another of the same name is never written). A pod gone from the API is not written.
// Static pods write to their mirror pod when one exists.
func (m *Manager) SetPodStatus(ctx context.Context, pod *v1.Pod, status v1.PodStatus) error {
	defer m.lockPod(pod.UID)()
	return m.set(ctx, pod, status)
}

// set is SetPodStatus with the pod's write lock held.
func (m *Manager) set(ctx context.Context, pod *v1.Pod, status v1.PodStatus) error {
	m.mu.Lock()
	last, cached := m.statuses[pod.UID]
	m.statuses[pod.UID] = *status.DeepCopy()
	m.mu.Unlock()
	if (cached && equal(&last, &status)) || (!cached && len(differs(&pod.Status, &status)) == 0) {
		return nil
	}
	target := pod
	if IsStatic(pod) {
		mirror, err := m.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil || mirror.Annotations[ConfigMirrorAnnotation] == "" {
			return nil
		}
		target = mirror
	}
	return m.write(ctx, pod.UID, target, status)
}

// write patches status onto target, the API object (a static pod's mirror pod), keeping the conditions
// that others own as target has them. On an error the cached status of uid is forgotten, so that the
// next sync writes again.
func (m *Manager) write(ctx context.Context, uid types.UID, target *v1.Pod, status v1.PodStatus) error {
	status.Conditions = MergeConditions(status.Conditions, target.Status.Conditions)
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": target.UID}, "status": status})
	if err != nil {
		return err
	}
	_, err = m.client.CoreV1().Pods(target.Namespace).Patch(ctx, target.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Gone, or replaced by a pod with another UID: nothing of ours to write.
		return nil
	}
	if err != nil {
		m.mu.Lock()
		delete(m.statuses, uid)
		m.mu.Unlock()
		return fmt.Errorf("patch status of pod %s/%s: %w", target.Namespace, target.Name, err)
	}
	m.log.Debug("pod status written", "pod", target.Namespace+"/"+target.Name, "phase", status.Phase, "ready", isReady(&status))
	return nil
}

// SetContainerReadiness sets Ready of the container instance containerID ("<runtime>://<id>") in the
// pod's last status, recomputes the ContainersReady and Ready conditions, and writes the result. As
// upstream's status manager does, this lets a readiness change reach the API while the pod worker is
// busy (e.g. waiting out a terminating pod's grace period). Unknown pods or containers are ignored.
func (m *Manager) SetContainerReadiness(ctx context.Context, pod *v1.Pod, containerID string, ready bool) error {
	defer m.lockPod(pod.UID)()
	m.mu.Lock()
	last, ok := m.statuses[pod.UID]
	m.mu.Unlock()
	if !ok {
		return nil
	}
	s := *last.DeepCopy()
	found := false
	for _, list := range [][]v1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses} {
		for i := range list {
			if list[i].ContainerID == containerID && list[i].Ready != ready {
				list[i].Ready, found = ready, true
			}
		}
	}
	if !found {
		return nil
	}
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	rc := readyConditions(pod, &s, last.Conditions, now)
	for i := range s.Conditions {
		for _, c := range rc {
			if s.Conditions[i].Type == c.Type {
				s.Conditions[i] = c
			}
		}
	}
	return m.set(ctx, pod, s)
}

// FinishDeletion deletes the API object of a pod whose containers have all stopped (grace period 0,
// precondition on its UID so a newer pod of the same name is never touched). Already gone is fine;
// static pods are not deleted here (their mirror pods belong to the node's static pod source).
func (m *Manager) FinishDeletion(ctx context.Context, pod *v1.Pod) error {
	if IsStatic(pod) {
		return nil
	}
	zero := int64(0)
	uid := pod.UID
	err := m.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero,
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	m.log.Info("pod deletion finished", "pod", pod.Namespace+"/"+pod.Name, "podUID", pod.UID)
	return nil
}

// isReady reports whether status has the Ready condition True.
func isReady(status *v1.PodStatus) bool {
	for _, c := range status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}
