package kuberuntime

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// PodStatus is what the runtime has for one pod: its sandboxes and containers, newest first.
type PodStatus struct {
	ID        types.UID
	Name      string
	Namespace string
	// IPs are the pod IPs of the newest ready sandbox, primary first.
	IPs               []string
	SandboxStatuses   []*runtimeapi.PodSandboxStatus
	ContainerStatuses []*ContainerStatus
}

// ContainerStatus is one container instance as the runtime reports it.
type ContainerStatus struct {
	// ID is the CRI container ID; Runtime the runtime name for "<runtime>://<id>" references.
	ID, Runtime string
	// SandboxID is the CRI ID of the sandbox the container belongs to.
	SandboxID  string
	Name       string
	State      runtimeapi.ContainerState
	CreatedAt  time.Time
	StartedAt  time.Time
	FinishedAt time.Time
	ExitCode   int32
	// Image is the image as specified; ImageRef the resolved image ID; ImageID the digest reference.
	Image, ImageRef string
	Hash            string
	RestartCount    int
	// Reason and Message explain an exit (CRI: "Completed", "Error", "OOMKilled", ...).
	Reason, Message string
}

// ContainerID returns the "<runtime>://<id>" form used in the API's container statuses.
func (c *ContainerStatus) ContainerID() string { return c.Runtime + "://" + c.ID }

// FindContainerStatus returns the newest instance of the named container, or nil.
func (s *PodStatus) FindContainerStatus(name string) *ContainerStatus {
	for _, c := range s.ContainerStatuses {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// ContainerInstances returns every instance of the named container, newest first.
func (s *PodStatus) ContainerInstances(name string) []*ContainerStatus {
	var out []*ContainerStatus
	for _, c := range s.ContainerStatuses {
		if c.Name == name {
			out = append(out, c)
		}
	}
	return out
}

// ReadySandbox returns the newest sandbox when it is ready, else nil.
func (s *PodStatus) ReadySandbox() *runtimeapi.PodSandboxStatus {
	if len(s.SandboxStatuses) > 0 && s.SandboxStatuses[0].State == runtimeapi.PodSandboxState_SANDBOX_READY {
		return s.SandboxStatuses[0]
	}
	return nil
}

// NextAttempt is the sandbox attempt after every sandbox of the pod (0 for the first): the runtime
// reserves each <name>_<namespace>_<uid>_<attempt> until that sandbox is removed, and a failed sandbox
// may be listed without a creation time, so the newest one does not tell.
func (s *PodStatus) NextAttempt() uint32 {
	var next uint32
	for _, sb := range s.SandboxStatuses {
		next = max(next, sb.GetMetadata().GetAttempt()+1)
	}
	return next
}

// RunningPod is a pod the runtime has, named by its CRI labels (used for orphans and clean-up).
type RunningPod struct {
	UID       types.UID
	Name      string
	Namespace string
	// GracePeriod is the termination grace period recorded on its containers, if any (seconds).
	GracePeriod *int64
	// Running: some sandbox is ready or some container is running or created.
	Running bool
}

// Waiting is why a container is waiting, as shown in its status (reason such as ErrImagePull,
// ImagePullBackOff, CrashLoopBackOff, CreateContainerConfigError, CreateContainerError,
// RunContainerError, PostStartHookError; message the detail).
type Waiting struct {
	Reason, Message string
}
