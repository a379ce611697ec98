// Package volumes sets up and tears down a pod's volumes on the node, in the kubelet's layout
// <root>/pods/<uid>/volumes/kubernetes.io~<plugin>/<name>: emptyDir (on disk, or tmpfs for medium Memory),
// hostPath (with its type checks), and the projected kinds configMap, secret (on tmpfs, as upstream),
// downwardAPI and projected (including serviceAccountToken through the TokenRequest API), whose files are
// written atomically (see writeAtomic) and refreshed on every pod sync.
package volumes

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
	authv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit/kubelet/fieldpath"
)

// Plugin directory names, as upstream's volume plugins name them.
const (
	pluginEmptyDir  = "kubernetes.io~empty-dir"
	pluginConfigMap = "kubernetes.io~configmap"
	pluginSecret    = "kubernetes.io~secret"
	pluginDownward  = "kubernetes.io~downward-api"
	pluginProjected = "kubernetes.io~projected"
)

// Manager sets up pod volumes below root.
type Manager struct {
	root     string
	nodeName string
	client   kubernetes.Interface
	objects  Objects
	log      *slog.Logger
	tokens   *tokens
	// NodeAllocatable returns the node's allocatable resources (nil: unknown), which a downwardAPI
	// resourceFieldRef of a limit the container does not set reports, as upstream (optional).
	NodeAllocatable func() v1.ResourceList
}

// Objects reads the ConfigMaps and Secrets that volumes project (kubelet/objectcache.Manager, a
// watch-based cache, implements it). Errors are the API's (NotFound for a missing object).
type Objects interface {
	GetConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error)
	GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error)
}

// New returns a Manager keeping pod directories below root (the kubelet's --root-dir) for the pods of
// Node nodeName; objects reads configMaps and secrets; client reads claims, their volumes and the Node
// (whose labels a volume's node affinity must admit) and requests service account tokens.
func New(root, nodeName string, client kubernetes.Interface, objects Objects, log *slog.Logger) *Manager {
	return &Manager{root: root, nodeName: nodeName, client: client, objects: objects, log: log, tokens: newTokens(client)}
}

// PodDir is <root>/pods/<uid>.
func (m *Manager) PodDir(uid types.UID) string { return filepath.Join(m.root, "pods", string(uid)) }

func (m *Manager) volumeDir(uid types.UID, plugin, name string) string {
	return filepath.Join(m.PodDir(uid), "volumes", plugin, name)
}

// SetUpPod makes every volume of pod ready and returns the host path of each by volume name. It is
// idempotent and refreshes configMap, secret, downwardAPI and projected contents. The error names the
// volume and the reason (e.g. a missing non-optional configMap); volumes it could set up stay.
func (m *Manager) SetUpPod(ctx context.Context, pod *v1.Pod) (map[string]string, error) {
	paths := map[string]string{}
	var errs []error
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		p, err := m.setUp(ctx, pod, vol)
		if err != nil {
			errs = append(errs, fmt.Errorf("volume %q: %w", vol.Name, err))
			continue
		}
		paths[vol.Name] = p
	}
	return paths, errors.Join(errs...)
}

func (m *Manager) setUp(ctx context.Context, pod *v1.Pod, vol *v1.Volume) (string, error) {
	src := vol.VolumeSource
	switch {
	case src.EmptyDir != nil:
		dir := m.volumeDir(pod.UID, pluginEmptyDir, vol.Name)
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return "", err
		}
		if err := os.Chmod(dir, 0o777); err != nil {
			return "", err
		}
		if src.EmptyDir.Medium == v1.StorageMediumMemory {
			var size int64
			if src.EmptyDir.SizeLimit != nil {
				size = src.EmptyDir.SizeLimit.Value()
			}
			// The tmpfs root is the emptyDir: world-writable like the on-disk one (upstream's emptyDir
			// is 0777; a tmpfs it mounts has the kernel's default 1777).
			if err := mountTmpfs(dir, size, "1777"); err != nil {
				return "", err
			}
		}
		return dir, ownEmptyDir(dir, fsGroup(pod))
	case src.HostPath != nil:
		return src.HostPath.Path, checkHostPath(src.HostPath)
	case src.PersistentVolumeClaim != nil:
		return m.claimPath(ctx, pod, src.PersistentVolumeClaim.ClaimName)
	case src.ConfigMap != nil:
		files, err := m.configMapFiles(ctx, pod.Namespace, src.ConfigMap.Name, src.ConfigMap.Items, src.ConfigMap.DefaultMode, src.ConfigMap.Optional)
		if err != nil {
			return "", err
		}
		dir := m.volumeDir(pod.UID, pluginConfigMap, vol.Name)
		return dir, writeAtomic(dir, files, fsGroup(pod))
	case src.Secret != nil:
		files, err := m.secretFiles(ctx, pod.Namespace, src.Secret.SecretName, src.Secret.Items, src.Secret.DefaultMode, src.Secret.Optional)
		if err != nil {
			return "", err
		}
		dir := m.volumeDir(pod.UID, pluginSecret, vol.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		if err := mountTmpfs(dir, 0, "0755"); err != nil {
			return "", err
		}
		return dir, writeAtomic(dir, files, fsGroup(pod))
	case src.DownwardAPI != nil:
		files, err := m.downwardFiles(pod, src.DownwardAPI.Items, src.DownwardAPI.DefaultMode)
		if err != nil {
			return "", err
		}
		dir := m.volumeDir(pod.UID, pluginDownward, vol.Name)
		return dir, writeAtomic(dir, files, fsGroup(pod))
	case src.Projected != nil:
		files, err := m.projectedFiles(ctx, pod, src.Projected)
		if err != nil {
			return "", err
		}
		dir := m.volumeDir(pod.UID, pluginProjected, vol.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		if err := mountTmpfs(dir, 0, "0755"); err != nil {
			return "", err
		}
		return dir, writeAtomic(dir, files, fsGroup(pod))
	}
	return "", errors.New("unsupported volume type (supported: emptyDir, hostPath, persistentVolumeClaim, configMap, secret, downwardAPI, projected)")
}

// ownEmptyDir gives an emptyDir's root the pod's fsGroup (gid nil: nothing), group-writable with setgid
// so that what the pod's containers create in it belongs to that group, as upstream's emptyDir runs
// SetVolumeOwnership when it sets the volume up. Only the root is changed: the directory is new, and
// the files the pod writes later keep the modes it gives them across syncs.
func ownEmptyDir(dir string, gid *int64) error {
	if gid == nil {
		return nil
	}
	info, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if err := os.Lchown(dir, -1, int(*gid)); err != nil {
		return err
	}
	return os.Chmod(dir, groupMode(info.Mode(), false)|os.ModeSetgid|execMask)
}

// checkHostPath applies the hostPath type (Kubernetes "hostPath volume types").
func checkHostPath(h *v1.HostPathVolumeSource) error {
	t := v1.HostPathUnset
	if h.Type != nil {
		t = *h.Type
	}
	st, err := os.Stat(h.Path)
	exists := err == nil
	switch t {
	case v1.HostPathUnset:
		return nil
	case v1.HostPathDirectoryOrCreate:
		if !exists {
			return os.MkdirAll(h.Path, 0o755)
		}
		if !st.IsDir() {
			return fmt.Errorf("hostPath %s exists and is not a directory", h.Path)
		}
		return nil
	case v1.HostPathFileOrCreate:
		if !exists {
			if err := os.MkdirAll(filepath.Dir(h.Path), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(h.Path, os.O_CREATE|os.O_RDONLY, 0o644)
			if err != nil {
				return err
			}
			return f.Close()
		}
		if st.IsDir() {
			return fmt.Errorf("hostPath %s exists and is a directory, not a file", h.Path)
		}
		return nil
	}
	if !exists {
		return fmt.Errorf("hostPath type check failed: %s does not exist (type %s)", h.Path, t)
	}
	var ok bool
	switch t {
	case v1.HostPathDirectory:
		ok = st.IsDir()
	case v1.HostPathFile:
		ok = st.Mode().IsRegular()
	case v1.HostPathSocket:
		ok = st.Mode()&fs.ModeSocket != 0
	case v1.HostPathCharDev:
		ok = st.Mode()&fs.ModeCharDevice != 0
	case v1.HostPathBlockDev:
		ok = st.Mode()&fs.ModeDevice != 0 && st.Mode()&fs.ModeCharDevice == 0
	default:
		return fmt.Errorf("hostPath %s: unknown type %q", h.Path, t)
	}
	if !ok {
		return fmt.Errorf("hostPath type check failed: %s is not a %s", h.Path, t)
	}
	return nil
}

// mountTmpfs mounts a tmpfs with root directory mode perm (octal) on dir unless one is there; size 0
// means the kernel default.
func mountTmpfs(dir string, size int64, perm string) error {
	if mounted, err := mountinfo.Mounted(dir); err == nil && mounted {
		return nil
	}
	opts := "mode=" + perm
	if size > 0 {
		opts += ",size=" + strconv.FormatInt(size, 10)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", dir, err)
	}
	return nil
}

func mode(m *int32, def int32) os.FileMode {
	if m != nil {
		return os.FileMode(*m)
	}
	return os.FileMode(def)
}

func optional(b *bool) bool { return b != nil && *b }

// keyFiles maps keys to files: all keys when items is empty, else the listed keys (a missing listed key
// is an error unless the source is optional).
func keyFiles(data map[string][]byte, items []v1.KeyToPath, defMode os.FileMode, opt bool, what string) (map[string]File, error) {
	out := map[string]File{}
	if len(items) == 0 {
		for k, v := range data {
			out[k] = File{Data: v, Mode: defMode}
		}
		return out, nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if opt {
				continue
			}
			return nil, fmt.Errorf("%s has no key %q", what, it.Key)
		}
		out[it.Path] = File{Data: v, Mode: mode(it.Mode, int32(defMode))}
	}
	return out, nil
}

func (m *Manager) configMapFiles(ctx context.Context, ns, name string, items []v1.KeyToPath, defMode *int32, opt *bool) (map[string]File, error) {
	cm, err := m.objects.GetConfigMap(ctx, ns, name)
	if apierrors.IsNotFound(err) && optional(opt) {
		return map[string]File{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("configmap %q: %w", name, err)
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return keyFiles(data, items, mode(defMode, v1.ConfigMapVolumeSourceDefaultMode), optional(opt), fmt.Sprintf("configmap %q", name))
}

func (m *Manager) secretFiles(ctx context.Context, ns, name string, items []v1.KeyToPath, defMode *int32, opt *bool) (map[string]File, error) {
	s, err := m.objects.GetSecret(ctx, ns, name)
	if apierrors.IsNotFound(err) && optional(opt) {
		return map[string]File{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("secret %q: %w", name, err)
	}
	return keyFiles(s.Data, items, mode(defMode, v1.SecretVolumeSourceDefaultMode), optional(opt), fmt.Sprintf("secret %q", name))
}

// downwardFiles renders a downwardAPI volume's (or projected source's) items: field paths, and resource
// fields of the named container with the node's allocatable as the default of unset limits.
func (m *Manager) downwardFiles(pod *v1.Pod, items []v1.DownwardAPIVolumeFile, defMode *int32) (map[string]File, error) {
	var allocatable v1.ResourceList
	if m.NodeAllocatable != nil {
		allocatable = m.NodeAllocatable()
	}
	out := map[string]File{}
	for _, it := range items {
		var val string
		var err error
		switch {
		case it.FieldRef != nil:
			val, err = fieldpath.Extract(pod, it.FieldRef.FieldPath)
		case it.ResourceFieldRef != nil:
			c := fieldpath.Container(pod, it.ResourceFieldRef.ContainerName)
			if c == nil {
				return nil, fmt.Errorf("downwardAPI %q: no container %q", it.Path, it.ResourceFieldRef.ContainerName)
			}
			val, err = fieldpath.Resource(c, it.ResourceFieldRef, allocatable)
		default:
			err = errors.New("needs fieldRef or resourceFieldRef")
		}
		if err != nil {
			return nil, fmt.Errorf("downwardAPI %q: %w", it.Path, err)
		}
		out[it.Path] = File{Data: []byte(val), Mode: mode(it.Mode, int32(mode(defMode, v1.DownwardAPIVolumeSourceDefaultMode)))}
	}
	return out, nil
}

func (m *Manager) projectedFiles(ctx context.Context, pod *v1.Pod, p *v1.ProjectedVolumeSource) (map[string]File, error) {
	out := map[string]File{}
	def := mode(p.DefaultMode, v1.ProjectedVolumeSourceDefaultMode)
	dm := int32(def)
	merge := func(files map[string]File, err error) error {
		for k, v := range files {
			out[k] = v
		}
		return err
	}
	for _, s := range p.Sources {
		var err error
		switch {
		case s.ConfigMap != nil:
			err = merge(m.configMapFiles(ctx, pod.Namespace, s.ConfigMap.Name, s.ConfigMap.Items, &dm, s.ConfigMap.Optional))
		case s.Secret != nil:
			err = merge(m.secretFiles(ctx, pod.Namespace, s.Secret.Name, s.Secret.Items, &dm, s.Secret.Optional))
		case s.DownwardAPI != nil:
			err = merge(m.downwardFiles(pod, s.DownwardAPI.Items, &dm))
		case s.ServiceAccountToken != nil:
			err = merge(m.tokenFile(ctx, pod, s.ServiceAccountToken, def))
		default:
			err = errors.New("unsupported projected source")
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// tokenFile returns a token bound to the pod for its service account (TokenRequest API), reused across
// syncs while fresh (see tokens).
func (m *Manager) tokenFile(ctx context.Context, pod *v1.Pod, t *v1.ServiceAccountTokenProjection, def os.FileMode) (map[string]File, error) {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	exp := int64(3600)
	if t.ExpirationSeconds != nil {
		exp = *t.ExpirationSeconds
	}
	req := &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{
		ExpirationSeconds: &exp,
		BoundObjectRef:    &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if t.Audience != "" {
		req.Spec.Audiences = []string{t.Audience}
	}
	token, err := m.tokens.get(ctx, tokenKey{pod: pod.UID, namespace: pod.Namespace, account: sa, audience: t.Audience, expiration: exp}, req)
	if err != nil {
		return nil, fmt.Errorf("service account token for %q: %w", sa, err)
	}
	return map[string]File{t.Path: {Data: []byte(token), Mode: def}}, nil
}

// TearDownPod unmounts the pod's tmpfs volumes and removes its volume directories (hostPath contents
// are never touched). Missing directories are fine.
func (m *Manager) TearDownPod(uid types.UID) error {
	m.tokens.forget(uid)
	if err := m.tearDownSubPaths(uid); err != nil {
		return err
	}
	return unmountAndRemove(filepath.Join(m.PodDir(uid), "volumes"))
}

// unmountAndRemove lazily unmounts every mount at or below dir, then removes dir; the error names the
// mounts that would not go (dir is then left).
func unmountAndRemove(dir string) error {
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		return err
	}
	var errs []error
	for _, mi := range mounts {
		if err := unix.Unmount(mi.Mountpoint, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", mi.Mountpoint, err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return os.RemoveAll(dir)
}

// RemovePodDir tears down the volumes and removes <root>/pods/<uid>.
func (m *Manager) RemovePodDir(uid types.UID) error {
	if err := m.TearDownPod(uid); err != nil {
		return err
	}
	return os.RemoveAll(m.PodDir(uid))
}

// PodDirs lists the pod UIDs that have a directory below root (for cleaning up after pods removed
// while the kubelet was down).
func (m *Manager) PodDirs() ([]types.UID, error) {
	entries, err := os.ReadDir(filepath.Join(m.root, "pods"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []types.UID
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, types.UID(e.Name()))
		}
	}
	return out, nil
}
