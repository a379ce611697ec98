package kuberuntime

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/podspec"
)

// Image pull failure reasons, as upstream's container status shows them.
const (
	ErrImagePull      = "ErrImagePull"
	ImagePullBackOff  = "ImagePullBackOff"
	ErrImageNeverPull = "ErrImageNeverPull"
	InvalidImageName  = "InvalidImageName"
)

// imagePuller ensures images exist per imagePullPolicy, backing off per pod and image after failures.
type imagePuller struct {
	images    runtimeapi.ImageServiceClient
	recorder  record.EventRecorder
	backOff   *flowcontrol.Backoff
	serialize sync.Mutex
	serial    bool
}

func newImagePuller(images runtimeapi.ImageServiceClient, rec record.EventRecorder, initial, max time.Duration, serial bool) *imagePuller {
	return &imagePuller{images: images, recorder: rec, backOff: flowcontrol.NewBackOff(initial, max), serial: serial}
}

// gc drops back-off entries that expired (they are keyed by pod UID and image).
func (p *imagePuller) gc() { p.backOff.GC() }

// ensure makes the container's image present per its imagePullPolicy (Always: pull every time;
// IfNotPresent: pull when missing; Never: fail when missing) and returns the image reference to create
// the container from. On failure it returns a Waiting reason: ErrImagePull for a failed pull,
// ImagePullBackOff while backing off after one, ErrImageNeverPull, InvalidImageName.
func (p *imagePuller) ensure(ctx context.Context, pod *v1.Pod, c *v1.Container, secrets []v1.Secret, sandboxConfig *runtimeapi.PodSandboxConfig) (string, *Waiting) {
	if c.Image == "" {
		return "", &Waiting{Reason: InvalidImageName, Message: fmt.Sprintf("container %q: image is empty", c.Name)}
	}
	spec := &runtimeapi.ImageSpec{Image: c.Image, UserSpecifiedImage: c.Image}
	policy := c.ImagePullPolicy
	if policy == "" {
		policy = podspec.DefaultPullPolicy(c.Image)
	}
	if policy != v1.PullAlways {
		st, err := p.images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: spec})
		if err == nil && st.Image != nil {
			if policy == v1.PullIfNotPresent {
				p.recorder.Eventf(pod, v1.EventTypeNormal, "Pulled", "Container image %q already present on machine", c.Image)
			}
			return st.Image.Id, nil
		}
		if policy == v1.PullNever {
			msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", c.Image)
			p.recorder.Event(pod, v1.EventTypeWarning, ErrImageNeverPull, msg)
			return "", &Waiting{Reason: ErrImageNeverPull, Message: msg}
		}
	}
	key := string(pod.UID) + "/" + c.Image
	if p.backOff.IsInBackOffSinceUpdate(key, p.backOff.Clock.Now()) {
		msg := fmt.Sprintf("Back-off pulling image %q", c.Image)
		p.recorder.Event(pod, v1.EventTypeNormal, "BackOff", msg)
		return "", &Waiting{Reason: ImagePullBackOff, Message: msg}
	}
	if p.serial {
		p.serialize.Lock()
		defer p.serialize.Unlock()
	}
	p.recorder.Eventf(pod, v1.EventTypeNormal, "Pulling", "Pulling image %q", c.Image)
	start := time.Now()
	var lastErr error
	for _, auth := range pullAuths(c.Image, secrets) {
		resp, err := p.images.PullImage(ctx, &runtimeapi.PullImageRequest{Image: spec, Auth: auth, SandboxConfig: sandboxConfig})
		if err == nil {
			p.backOff.Reset(key)
			p.recorder.Eventf(pod, v1.EventTypeNormal, "Pulled", "Successfully pulled image %q in %s", c.Image, time.Since(start).Round(time.Millisecond))
			return resp.ImageRef, nil
		}
		lastErr = err
	}
	p.backOff.Next(key, p.backOff.Clock.Now())
	msg := fmt.Sprintf("Failed to pull image %q: %v", c.Image, lastErr)
	p.recorder.Event(pod, v1.EventTypeWarning, "Failed", msg)
	return "", &Waiting{Reason: ErrImagePull, Message: msg}
}

// registryHost returns the registry an image reference points at, normalised as docker does
// ("docker.io" for single-component or unqualified names).
func registryHost(image string) string {
	first, _, found := strings.Cut(image, "/")
	if !found || (!strings.ContainsAny(first, ".:") && first != "localhost") {
		return "docker.io"
	}
	return first
}

type dockerConfigEntry struct {
	Username string `json:"username"`
	Password string `json:"password"`
	Auth     string `json:"auth"`
}

// pullAuths returns the credentials to try, in order, for image from the pod's pull secrets
// (kubernetes.io/dockerconfigjson and kubernetes.io/dockercfg), ending with an anonymous attempt.
func pullAuths(image string, secrets []v1.Secret) []*runtimeapi.AuthConfig {
	host := registryHost(image)
	var out []*runtimeapi.AuthConfig
	for _, s := range secrets {
		entries := map[string]dockerConfigEntry{}
		switch s.Type {
		case v1.SecretTypeDockerConfigJson:
			var cfg struct {
				Auths map[string]dockerConfigEntry `json:"auths"`
			}
			if json.Unmarshal(s.Data[v1.DockerConfigJsonKey], &cfg) == nil {
				entries = cfg.Auths
			}
		case v1.SecretTypeDockercfg:
			_ = json.Unmarshal(s.Data[v1.DockerConfigKey], &entries)
		}
		for reg, e := range entries {
			r := strings.TrimPrefix(strings.TrimPrefix(reg, "https://"), "http://")
			r, _, _ = strings.Cut(r, "/")
			if r == "index.docker.io" {
				r = "docker.io"
			}
			if r != host {
				continue
			}
			a := &runtimeapi.AuthConfig{Username: e.Username, Password: e.Password, ServerAddress: reg}
			if e.Auth != "" && a.Username == "" {
				if b, err := base64.StdEncoding.DecodeString(e.Auth); err == nil {
					a.Username, a.Password, _ = strings.Cut(string(b), ":")
				}
			}
			out = append(out, a)
		}
	}
	return append(out, nil)
}
