// Package config loads the kubelet's configuration: a KubeletConfiguration file
// (kubelet.config.k8s.io/v1beta1, the real type from k8s.io/kubelet/config/v1beta1) overlaid with the
// command-line flags that were set explicitly, the precedence upstream's kubelet documents ("flags
// override the config file", https://kubernetes.io/docs/tasks/administer-cluster/kubelet-config-file/).
//
// nodekit supports a subset of the fields (see Supported); a file naming a field the type does not have
// is rejected with an error naming that field, and a file setting a valid field nodekit does not act on
// is accepted with one warning per field, so an upstream file can be reused as is.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Kind and APIVersion are the type meta every KubeletConfiguration file must carry.
const (
	Kind       = "KubeletConfiguration"
	APIVersion = "kubelet.config.k8s.io/v1beta1"
)

// Supported lists the top-level KubeletConfiguration fields (their JSON names) that nodekit acts on.
var Supported = []string{
	"apiVersion", "kind",
	"address", "port", "tlsCertFile", "tlsPrivateKeyFile", "serverTLSBootstrap", "rotateCertificates", "authentication",
	"staticPodPath", "fileCheckFrequency", "podLogsDir", "syncFrequency",
	"clusterDNS", "clusterDomain", "resolvConf",
	"nodeStatusUpdateFrequency", "nodeStatusReportFrequency", "nodeLeaseDurationSeconds",
	"maxPods", "cgroupRoot", "cgroupDriver", "registerWithTaints",
	"containerRuntimeEndpoint", "imageServiceEndpoint", "runtimeRequestTimeout",
	"containerLogMaxSize", "containerLogMaxFiles", "containerLogMonitorInterval",
	"imageGCHighThresholdPercent", "imageGCLowThresholdPercent", "imageMinimumGCAge",
	"evictionHard", "evictionSoft", "evictionSoftGracePeriod", "evictionMinimumReclaim",
	"evictionPressureTransitionPeriod", "evictionMaxPodGracePeriod",
	"enableProfilingHandler", "allowedUnsafeSysctls",
}

// Default returns a KubeletConfiguration holding upstream's v1beta1 defaults for the fields nodekit
// supports (k8s.io/kubernetes pkg/kubelet/apis/config/v1beta1 SetDefaults_KubeletConfiguration), except
// that anonymous authentication is off (nodekit's kubelet server always requires a client certificate),
// serverTLSBootstrap is on (the kubelet asks the cluster CA for its serving certificate, which nodekit's
// API server verifies; it serves a self-signed one until the CSR is signed), rotateCertificates is on
// (the node client certificate is renewed through a CSR before it expires, as kubeadm and k3s configure
// their kubelets; kubelet/certmanager) and containerRuntimeEndpoint
// is empty, which means nodekit's own managed containerd. evictionHard is left nil, which means
// upstream's default thresholds (EvictionThresholds), so that a file's map replaces them rather than
// merging into them.
func Default() *kubeletv1beta1.KubeletConfiguration {
	anonymous, profiling, webhook := false, true, true
	resolvConf := "/etc/resolv.conf"
	logMaxFiles, gcHigh, gcLow := int32(5), int32(85), int32(80)
	return &kubeletv1beta1.KubeletConfiguration{
		TypeMeta:                         metav1.TypeMeta{Kind: Kind, APIVersion: APIVersion},
		ServerTLSBootstrap:               true,
		RotateCertificates:               true,
		Address:                          "0.0.0.0",
		Port:                             10250,
		PodLogsDir:                       "/var/log/pods",
		SyncFrequency:                    metav1.Duration{Duration: time.Minute},
		ResolverConfig:                   &resolvConf,
		FileCheckFrequency:               metav1.Duration{Duration: 20 * time.Second},
		NodeStatusUpdateFrequency:        metav1.Duration{Duration: 10 * time.Second},
		NodeStatusReportFrequency:        metav1.Duration{Duration: 5 * time.Minute},
		NodeLeaseDurationSeconds:         40,
		MaxPods:                          110,
		RuntimeRequestTimeout:            metav1.Duration{Duration: 2 * time.Minute},
		ContainerLogMaxSize:              "10Mi",
		ContainerLogMaxFiles:             &logMaxFiles,
		ContainerLogMonitorInterval:      &metav1.Duration{Duration: 10 * time.Second},
		ImageGCHighThresholdPercent:      &gcHigh,
		ImageGCLowThresholdPercent:       &gcLow,
		ImageMinimumGCAge:                metav1.Duration{Duration: 2 * time.Minute},
		EvictionPressureTransitionPeriod: metav1.Duration{Duration: 5 * time.Minute},
		EnableProfilingHandler:           &profiling,
		Authentication: kubeletv1beta1.KubeletAuthentication{
			Anonymous: kubeletv1beta1.KubeletAnonymousAuthentication{Enabled: &anonymous},
			Webhook: kubeletv1beta1.KubeletWebhookAuthentication{Enabled: &webhook,
				CacheTTL: metav1.Duration{Duration: 2 * time.Minute}},
		},
		Authorization: kubeletv1beta1.KubeletAuthorization{Mode: kubeletv1beta1.KubeletAuthorizationModeWebhook,
			Webhook: kubeletv1beta1.KubeletWebhookAuthorization{CacheAuthorizedTTL: metav1.Duration{Duration: 5 * time.Minute},
				CacheUnauthorizedTTL: metav1.Duration{Duration: 30 * time.Second}}},
	}
}

// LoadFile decodes the KubeletConfiguration YAML (or JSON) file at path over Default() and validates it.
// Errors name the file and the reason: unreadable file, wrong apiVersion/kind, a field the v1beta1 type
// does not have (`unknown field "fooBar"`), a value of the wrong type, or a Validate failure. Fields
// nodekit does not support are logged once each at warn level and otherwise ignored.
func LoadFile(path string) (*kubeletv1beta1.KubeletConfiguration, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("kubelet config: %w", err)
	}
	cfg, ignored, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("kubelet config %s: %w", path, err)
	}
	for _, f := range ignored {
		slog.Warn("kubelet config field not supported by nodekit, ignored", "file", path, "field", f)
	}
	return cfg, nil
}

// Decode is LoadFile on bytes: it returns the configuration and the sorted names of the top-level
// fields that were set but are not in Supported.
func Decode(data []byte) (*kubeletv1beta1.KubeletConfiguration, []string, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(data, &tm); err != nil {
		return nil, nil, fmt.Errorf("not a YAML or JSON object: %w", err)
	}
	if tm.APIVersion != APIVersion || tm.Kind != Kind {
		return nil, nil, fmt.Errorf("apiVersion/kind is %q/%q, want %q/%q", tm.APIVersion, tm.Kind, APIVersion, Kind)
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, nil, err
	}
	cfg := Default()
	strictErrs, err := sigsjson.UnmarshalStrict(js, cfg, sigsjson.DisallowUnknownFields, sigsjson.DisallowDuplicateFields)
	if err != nil {
		return nil, nil, err
	}
	if len(strictErrs) > 0 {
		return nil, nil, errors.Join(strictErrs...)
	}
	var fields map[string]any
	if err := yaml.Unmarshal(bytes.TrimSpace(data), &fields); err != nil {
		return nil, nil, err
	}
	var ignored []string
	for f := range fields {
		if !slices.Contains(Supported, f) {
			ignored = append(ignored, f)
		}
	}
	sort.Strings(ignored)
	if err := Validate(cfg); err != nil {
		return nil, nil, err
	}
	return cfg, ignored, nil
}

// Validate checks the supported fields: port 1-65535, positive frequencies, lease duration and
// runtimeRequestTimeout, maxPods
// > 0, cgroupDriver empty (the runtime's), cgroupfs or systemd, well-formed taints, anonymous and webhook authentication off.
// The error names the field.
func Validate(c *kubeletv1beta1.KubeletConfiguration) error {
	switch {
	case c.Port < 1 || c.Port > 65535:
		return fmt.Errorf("port: %d is not in 1-65535", c.Port)
	case c.SyncFrequency.Duration <= 0:
		return fmt.Errorf("syncFrequency: %v must be positive", c.SyncFrequency.Duration)
	case c.FileCheckFrequency.Duration <= 0:
		return fmt.Errorf("fileCheckFrequency: %v must be positive", c.FileCheckFrequency.Duration)
	case c.NodeStatusUpdateFrequency.Duration <= 0:
		return fmt.Errorf("nodeStatusUpdateFrequency: %v must be positive", c.NodeStatusUpdateFrequency.Duration)
	case c.NodeStatusReportFrequency.Duration < c.NodeStatusUpdateFrequency.Duration:
		return fmt.Errorf("nodeStatusReportFrequency: %v must not be shorter than nodeStatusUpdateFrequency (%v)", c.NodeStatusReportFrequency.Duration, c.NodeStatusUpdateFrequency.Duration)
	case c.NodeLeaseDurationSeconds <= 0:
		return fmt.Errorf("nodeLeaseDurationSeconds: %d must be positive", c.NodeLeaseDurationSeconds)
	case c.RuntimeRequestTimeout.Duration <= 0:
		return fmt.Errorf("runtimeRequestTimeout: %v must be positive", c.RuntimeRequestTimeout.Duration)
	case c.MaxPods <= 0:
		return fmt.Errorf("maxPods: %d must be positive", c.MaxPods)
	case c.CgroupDriver != "" && c.CgroupDriver != "cgroupfs" && c.CgroupDriver != "systemd":
		return fmt.Errorf("cgroupDriver: %q is not cgroupfs or systemd", c.CgroupDriver)
	case c.ContainerRuntimeEndpoint == "" && c.ImageServiceEndpoint != "":
		return fmt.Errorf("imageServiceEndpoint: set without containerRuntimeEndpoint")
	case c.Authentication.Anonymous.Enabled != nil && *c.Authentication.Anonymous.Enabled:
		return fmt.Errorf("authentication.anonymous.enabled: nodekit's kubelet server always requires a client certificate or a bearer token")
	case c.Authorization.Mode != kubeletv1beta1.KubeletAuthorizationModeWebhook && c.Authorization.Mode != kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow:
		return fmt.Errorf("authorization.mode: %q is not Webhook or AlwaysAllow", c.Authorization.Mode)
	case (c.TLSCertFile == "") != (c.TLSPrivateKeyFile == ""):
		return fmt.Errorf("tlsCertFile/tlsPrivateKeyFile: set both or neither")
	}
	for i, t := range c.RegisterWithTaints {
		if err := validateTaint(t); err != nil {
			return fmt.Errorf("registerWithTaints[%d]: %w", i, err)
		}
	}
	return validateLongRun(c)
}

func validateTaint(t v1.Taint) error {
	if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
		return fmt.Errorf("key %q: %s", t.Key, errs[0])
	}
	if t.Value != "" {
		if errs := validation.IsValidLabelValue(t.Value); len(errs) > 0 {
			return fmt.Errorf("value %q: %s", t.Value, errs[0])
		}
	}
	switch t.Effect {
	case v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
		return nil
	}
	return fmt.Errorf("effect %q is not NoSchedule, PreferNoSchedule or NoExecute", t.Effect)
}
