package certmanager

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/certificate"
	"k8s.io/client-go/util/connrotation"
)

// WatchPeriod is how often Transport looks for a new certificate (a pointer comparison).
const WatchPeriod = time.Second

// Transport makes rc authenticate with m's current client certificate, as upstream's kubelet does
// (pkg/kubelet/certificate.UpdateTransport): rc's TLS settings move into a transport whose TLS client
// certificate is m.Current() at each handshake, and whose connections (client-go's connrotation dialer)
// are all closed when m's certificate changes, so requests continue on new connections with the new
// certificate; HTTP/2 would otherwise keep the old connection, and its certificate, for as long as it
// lives. rc must have no Transport or Dial of its own; log nil is slog.Default(). The returned func
// stops the watch.
func Transport(rc *rest.Config, m certificate.Manager, log *slog.Logger) (func(), error) {
	if log == nil {
		log = slog.Default()
	}
	if rc.Transport != nil || rc.Dial != nil {
		return nil, errors.New("certmanager: the client configuration already has a transport or dialer")
	}
	tlsConfig, err := rest.TLSConfigFor(rc)
	if err != nil {
		return nil, fmt.Errorf("certmanager: client TLS configuration: %w", err)
	}
	if tlsConfig == nil {
		tlsConfig = &tls.Config{}
	}
	tlsConfig.Certificates = nil
	tlsConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if cert := m.Current(); cert != nil {
			return cert, nil
		}
		return &tls.Certificate{}, nil // none yet: the server sees an anonymous client
	}
	d := connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
	stop := make(chan struct{})
	last := m.Current()
	go wait.Until(func() {
		cur := m.Current()
		if cur == nil || cur == last {
			return
		}
		last = cur
		log.Info("client certificate rotated: closing the API connections to use it", "subject", cur.Leaf.Subject.CommonName,
			"serial", cur.Leaf.SerialNumber.String(), "notAfter", cur.Leaf.NotAfter)
		d.CloseAll()
	}, WatchPeriod, stop)
	rc.Transport = utilnet.SetTransportDefaults(&http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig:     tlsConfig,
		MaxIdleConnsPerHost: 25,
		DialContext:         d.DialContext,
	})
	// The transport carries the TLS settings now; rest refuses a Transport next to them.
	rc.TLSClientConfig = rest.TLSClientConfig{}
	return func() { close(stop) }, nil
}
