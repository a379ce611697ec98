// Package static runs the kubelet's file pod source and its mirror pods: it reads the pod manifests in
// the static pod directory (--pod-manifest-path / staticPodPath), turns each into the pod the kubelet
// runs, hands the full set to the kubelet whenever it changes, and keeps one mirror pod per static pod in
// the API so the cluster can see it.
//
// It follows upstream (pkg/kubelet/config/file.go, common.go and pkg/kubelet/pod/mirror_client.go):
//   - every regular, non-hidden file of the directory is one Pod manifest (YAML or JSON);
//   - the pod is named <name>-<node name>, bound to the node (spec.nodeName), in namespace "default"
//     unless it names one, with a UID that is a hash of its manifest, the node and the file, and the
//     annotations kubernetes.io/config.hash (= UID), kubernetes.io/config.source ("file") and
//     kubernetes.io/config.seen;
//   - the mirror pod is the same pod with kubernetes.io/config.mirror = hash and an owner reference to
//     the Node; a mirror whose hash differs (the manifest changed) or that the API deleted is recreated,
//     and the mirror of a removed manifest is deleted.
package static

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/nodekit/nodekit/internal/podspec"
)

// Upstream's static pod annotations (k8s.io/kubernetes pkg/kubelet/types).
const (
	ConfigSourceAnnotation = "kubernetes.io/config.source"
	ConfigMirrorAnnotation = "kubernetes.io/config.mirror"
	ConfigHashAnnotation   = "kubernetes.io/config.hash"
	ConfigSeenAnnotation   = "kubernetes.io/config.seen"
	// FileSource is the config.source value of pods from manifest files.
	FileSource = "file"
)

// Sink receives the complete set of static pods each time it changes (an empty set when the last
// manifest is removed). The kubelet runs exactly these as its file-source pods.
type Sink interface {
	SetStaticPods(pods []*v1.Pod)
}

// Config configures a Source. Dir and NodeName are required.
type Config struct {
	// Dir is the manifest directory; a missing directory is treated as empty (upstream logs and waits).
	Dir      string
	NodeName string
	// Client creates and deletes mirror pods; nil disables mirror pods (standalone kubelet).
	Client kubernetes.Interface
	// Sink gets the pods (optional: without one only mirror pods are maintained).
	Sink Sink
	// Period is how often the directory is re-read and mirrors re-checked (fileCheckFrequency,
	// default 20 s).
	Period time.Duration
	Logger *slog.Logger
}

// Source watches the manifest directory. Create it with New and run it with Run.
type Source struct {
	cfg     Config
	log     *slog.Logger
	last    []*v1.Pod
	nodeUID types.UID
	mirrors map[string]bool // namespace/name of mirror pods this Source keeps
}

// New validates cfg and fills defaults.
func New(cfg Config) (*Source, error) {
	if cfg.Dir == "" || cfg.NodeName == "" {
		return nil, errors.New("static pods: Dir and NodeName are required")
	}
	if cfg.Period <= 0 {
		cfg.Period = 20 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Source{cfg: cfg, log: cfg.Logger.With("node", cfg.NodeName, "source", "file"), mirrors: map[string]bool{}}, nil
}

// Run reads the directory and syncs mirror pods every Period until ctx ends; it returns ctx's error.
func (s *Source) Run(ctx context.Context) error {
	t := time.NewTicker(s.cfg.Period)
	defer t.Stop()
	for {
		s.Sync(ctx)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Sync reads the manifests once, pushes a changed set to the Sink and reconciles the mirror pods. Bad
// manifests are logged (file=, err=) and skipped, as upstream does.
func (s *Source) Sync(ctx context.Context) {
	pods, errs := ReadDir(s.cfg.Dir, s.cfg.NodeName)
	for _, err := range errs {
		s.log.Error("static pod manifest rejected", "err", err)
	}
	if !samePods(pods, s.last) {
		s.log.Info("static pods changed", "count", len(pods))
		s.last = pods
		if s.cfg.Sink != nil {
			out := make([]*v1.Pod, len(pods))
			for i, p := range pods {
				out[i] = p.DeepCopy()
			}
			s.cfg.Sink.SetStaticPods(out)
		}
	}
	if s.cfg.Client != nil {
		if err := s.syncMirrors(ctx, pods); err != nil && ctx.Err() == nil {
			s.log.Error("mirror pod sync failed", "err", err)
		}
	}
}

// samePods compares by config hash (which covers the manifest) in order.
func samePods(a, b []*v1.Pod) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].UID != b[i].UID {
			return false
		}
	}
	return true
}

// ReadDir reads every regular, non-hidden file of dir as a pod manifest for node and returns the pods
// sorted by namespace/name, plus one error per rejected file (naming it). A missing dir gives no pods.
func ReadDir(dir, node string) ([]*v1.Pod, []error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, []error{fmt.Errorf("static pod dir: %w", err)}
	}
	var pods []*v1.Pod
	var errs []error
	seen := map[string]string{}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || !e.Type().IsRegular() {
			continue
		}
		path := filepath.Join(dir, e.Name())
		pod, err := ReadManifest(path, node)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		key := pod.Namespace + "/" + pod.Name
		if other, dup := seen[key]; dup {
			errs = append(errs, fmt.Errorf("static pod %s: pod %s is already defined by %s", path, key, other))
			continue
		}
		seen[key] = path
		pods = append(pods, pod)
	}
	sort.Slice(pods, func(i, j int) bool {
		return pods[i].Namespace+"/"+pods[i].Name < pods[j].Namespace+"/"+pods[j].Name
	})
	return pods, errs
}

// ReadManifest decodes one Pod manifest (YAML or JSON, kind Pod, apiVersion v1, unknown fields
// rejected) and makes it node's static pod (see the package doc). Errors name the file and the field.
func ReadManifest(path, node string) (*v1.Pod, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("static pod: %w", err)
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("static pod %s: %w", path, err)
	}
	pod := &v1.Pod{}
	strict, err := sigsjson.UnmarshalStrict(js, pod, sigsjson.DisallowUnknownFields)
	if err != nil {
		return nil, fmt.Errorf("static pod %s: %w", path, err)
	}
	if len(strict) > 0 {
		return nil, fmt.Errorf("static pod %s: %w", path, errors.Join(strict...))
	}
	if pod.Kind != "Pod" || pod.APIVersion != "v1" {
		return nil, fmt.Errorf("static pod %s: apiVersion/kind is %q/%q, want v1/Pod", path, pod.APIVersion, pod.Kind)
	}
	if pod.Name == "" {
		return nil, fmt.Errorf("static pod %s: metadata.name is required", path)
	}
	if len(pod.Spec.Containers) == 0 {
		return nil, fmt.Errorf("static pod %s: spec.containers: at least one container is required", path)
	}
	applyDefaults(pod, node, path)
	return pod, nil
}

// applyDefaults makes pod node's static pod: name suffix, namespace, nodeName, hash UID, annotations
// (upstream's applyDefaults in pkg/kubelet/config/common.go), plus the API's pod spec defaults
// (podspec.Default), which upstream's decoder applies to a manifest.
func applyDefaults(pod *v1.Pod, node, path string) {
	node = strings.ToLower(node)
	if pod.UID == "" {
		h := md5.New()
		b, _ := yaml.Marshal(pod)
		h.Write(b)
		fmt.Fprintf(h, "host:%s", node)
		fmt.Fprintf(h, "file:%s", path)
		pod.UID = types.UID(hex.EncodeToString(h.Sum(nil)))
	}
	pod.Name = pod.Name + "-" + node
	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	pod.Spec.NodeName = node
	pod.Status = v1.PodStatus{Phase: v1.PodPending}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[ConfigHashAnnotation] = string(pod.UID)
	pod.Annotations[ConfigSourceAnnotation] = FileSource
	// Static pods tolerate every NoExecute taint: the node lifecycle must not evict them.
	pod.Spec.Tolerations = append(pod.Spec.Tolerations, v1.Toleration{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute})
	podspec.Default(&pod.Spec)
}

// MirrorPod returns the mirror pod of static pod p for the Node with nodeUID: p with the mirror
// annotation and a controller owner reference to the Node (upstream's mirror client), without UID.
func MirrorPod(p *v1.Pod, nodeUID types.UID) *v1.Pod {
	m := p.DeepCopy()
	m.UID = ""
	m.ResourceVersion = ""
	m.Status = v1.PodStatus{}
	m.Annotations[ConfigMirrorAnnotation] = p.Annotations[ConfigHashAnnotation]
	controller := true
	m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: p.Spec.NodeName, UID: nodeUID, Controller: &controller}}
	return m
}

// syncMirrors creates missing mirror pods, recreates outdated ones and deletes orphans. The pods on
// this node are listed once (by spec.nodeName, the only pod list the Node authorizer grants a node; a
// node may not get a pod by name before it exists); orphans are the file-source mirror pods among them
// and the mirrors this Source created earlier whose static pod is gone.
func (s *Source) syncMirrors(ctx context.Context, pods []*v1.Pod) error {
	if s.nodeUID == "" {
		n, err := s.cfg.Client.CoreV1().Nodes().Get(ctx, s.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get node for mirror pod owner: %w", err)
		}
		s.nodeUID = n.UID
	}
	list, err := s.cfg.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + s.cfg.NodeName})
	if err != nil {
		return fmt.Errorf("list pods on node: %w", err)
	}
	onNode := map[string]*v1.Pod{}
	for i := range list.Items {
		p := &list.Items[i]
		onNode[p.Namespace+"/"+p.Name] = p
	}
	var errs []error
	want := map[string]bool{}
	for _, p := range pods {
		key := p.Namespace + "/" + p.Name
		want[key] = true
		if err := s.syncMirror(ctx, p, onNode[key]); err != nil {
			errs = append(errs, err)
			continue
		}
		s.mirrors[key] = true
	}
	orphans := map[string]bool{}
	for key := range s.mirrors {
		orphans[key] = true
	}
	for key, p := range onNode {
		// Mirror pods of other sources (the component processes' pods, kubelet/processpods) are theirs.
		if isMirror(p) && p.Annotations[ConfigSourceAnnotation] == FileSource {
			orphans[key] = true
		}
	}
	for key := range orphans {
		if want[key] {
			continue
		}
		if m := onNode[key]; m != nil && isMirror(m) {
			if err := s.deleteMirror(ctx, m); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		delete(s.mirrors, key)
	}
	return errors.Join(errs...)
}

// syncMirror makes the mirror pod of static pod p current given m, the pod of that name on this node
// (nil: none): created when missing, recreated when its hash or owner is outdated. A non-mirror pod
// holding the name is left alone and reported.
func (s *Source) syncMirror(ctx context.Context, p, m *v1.Pod) error {
	key := p.Namespace + "/" + p.Name
	want := MirrorPod(p, s.nodeUID)
	switch {
	case m == nil:
	case !isMirror(m):
		return fmt.Errorf("mirror pod %s: a pod that is not a mirror pod holds the name", key)
	case m.DeletionTimestamp == nil && m.Annotations[ConfigMirrorAnnotation] == p.Annotations[ConfigHashAnnotation] &&
		apiequality.Semantic.DeepEqual(m.OwnerReferences, want.OwnerReferences):
		return nil
	default:
		if err := s.deleteMirror(ctx, m); err != nil {
			return err
		}
	}
	if _, err := s.cfg.Client.CoreV1().Pods(p.Namespace).Create(ctx, want, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create mirror pod %s: %w", key, err)
	}
	s.log.Info("mirror pod created", "pod", key)
	return nil
}

func isMirror(p *v1.Pod) bool {
	_, ok := p.Annotations[ConfigMirrorAnnotation]
	return ok
}

// deleteMirror deletes mirror pod m (DeleteMirror) and logs it.
func (s *Source) deleteMirror(ctx context.Context, m *v1.Pod) error {
	if err := DeleteMirror(ctx, s.cfg.Client, m); err != nil {
		return err
	}
	s.log.Info("mirror pod deleted", "pod", m.Namespace+"/"+m.Name)
	return nil
}

// DeleteMirror deletes mirror pod m immediately (grace period 0, preconditioned on its UID, as
// upstream's mirror client); a pod already gone or replaced is not an error. Errors name the pod.
func DeleteMirror(ctx context.Context, client kubernetes.Interface, m *v1.Pod) error {
	grace := int64(0)
	uid := m.UID
	err := client.CoreV1().Pods(m.Namespace).Delete(ctx, m.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace, Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete mirror pod %s/%s: %w", m.Namespace, m.Name, err)
	}
	return nil
}
