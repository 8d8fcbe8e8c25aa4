package syncer

import "time"

// Settings are one process's settings: cmd/mcs-syncer's flags, checked
// there (README's flag table says what each one does).
type Settings struct {
	// ClustersetConfig is the path of the clusterset config file.
	ClustersetConfig string
	// LocalCluster is the member this process runs in (per-cluster mode),
	// or "" (central mode).
	LocalCluster         string
	ManagedBy            string
	MaxEndpointsPerSlice int
	UnreachableGrace     time.Duration
	// Leader election: where the Lease lives (LeaderElectKubeconfig or the
	// member LeaderElectCluster; else the cluster the process runs in, or
	// in per-cluster mode LocalCluster).
	LeaderElect           bool
	LeaderElectNamespace  string
	LeaderElectKubeconfig string
	LeaderElectCluster    string
	// Addresses of /metrics, of /healthz and /readyz, and of pprof ("0":
	// none).
	MetricsAddr, ProbeAddr, PprofAddr string
	// KubeAPIQPS and KubeAPIBurst limit each member's client (and the
	// publisher's client of the hub); a negative QPS means no limit.
	KubeAPIQPS   float64
	KubeAPIBurst int
	ImportSyncs  int
	ExportSyncs  int
	// Heartbeat is how often the local member renews its marker.
	Heartbeat time.Duration
	// MaxPublicationsPerMember bounds the heads and parts a reader holds
	// of one member (0: publish.DefaultMaxObjectsPerMember).
	MaxPublicationsPerMember int
	// MaxPublicationBytesPerMember bounds their bytes (0:
	// publish.DefaultMaxBytesPerMember).
	MaxPublicationBytesPerMember int64
	// CredentialPluginTimeout bounds one run of a member's (or the hub's)
	// exec credential plugin (0: credentials.DefaultTimeout).
	CredentialPluginTimeout time.Duration
}

// ConfigError is a bad setting in the clusterset config or in how the
// settings and the config fit together: the user's to fix (the command
// exits 2, as for a bad flag).
type ConfigError struct{ error }

func (e ConfigError) Unwrap() error { return e.error }
