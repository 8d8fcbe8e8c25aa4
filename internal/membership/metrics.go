package membership

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
)

// metrics are the membership's Prometheus metrics.
type metrics struct {
	connected    *prometheus.GaugeVec
	state        *prometheus.GaugeVec
	reloadOK     prometheus.Gauge
	reloadOKTime prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		connected: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mcs_syncer_member_connected",
			Help: "1 while mcs-syncer reaches the member cluster's API server (state syncing or engaged), 0 otherwise.",
		}, []string{"cluster"}),
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mcs_syncer_member_state",
			Help: "1 for the member's current state (connecting, config-error, unreachable, missing-crds, forbidden, failed, syncing, engaged), 0 for the others.",
		}, []string{"cluster", "state"}),
		reloadOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mcs_syncer_config_last_reload_success",
			Help: "1 if the clusterset config file was read and applied when it last changed, 0 if it was refused (the last good membership stays).",
		}),
		reloadOKTime: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mcs_syncer_config_last_reload_success_timestamp_seconds",
			Help: "When the clusterset config file was last read and applied, in seconds since the epoch.",
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.connected, m.state, m.reloadOK, m.reloadOKTime} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("membership: register metrics: %w", err)
			}
		}
	}
	return m, nil
}

func (m *metrics) setState(id clusterset.ClusterID, state State) {
	for _, s := range states {
		v := 0.0
		if s == state {
			v = 1
		}
		m.state.WithLabelValues(string(id), string(s)).Set(v)
	}
	v := 0.0
	if state.connected() {
		v = 1
	}
	m.connected.WithLabelValues(string(id)).Set(v)
}

// forget drops the series of a member that left.
func (m *metrics) forget(id clusterset.ClusterID) {
	m.connected.DeleteLabelValues(string(id))
	m.state.DeletePartialMatch(prometheus.Labels{"cluster": string(id)})
}

func (m *metrics) reloaded(ok bool) {
	if ok {
		m.reloadOK.Set(1)
		m.reloadOKTime.SetToCurrentTime()
		return
	}
	m.reloadOK.Set(0)
}
