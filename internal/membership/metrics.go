package membership

import (
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
)

// metrics are the membership's Prometheus metrics.
type metrics struct {
	connected *prometheus.GaugeVec
	up        *prometheus.GaugeVec
	// hubConnected has no labels: a vector only so that it has no series
	// until a member is read through a hub (a plain Gauge reported 0 in
	// central mode, a hub never reached).
	hubConnected *prometheus.GaugeVec
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
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mcs_syncer_member_up",
			Help: "1 while the member is up: engaged and, when read through its publications, heard from (its mcs-syncer renews its heartbeat); 0 while it is down or held (read through a hub that cannot be read). Its endpoints leave the imports once it has been down for --cluster-unreachable-grace.",
		}, []string{"cluster"}),
		hubConnected: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mcs_syncer_hub_connected",
			Help: "1 while the hub can be read, 0 while it cannot (the members read through it keep their exports as they are meanwhile); absent without a hub.",
		}, nil),
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mcs_syncer_member_state",
			Help: "1 for the member's current state (" + stateNames() + "), 0 for the others.",
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
		for _, c := range []prometheus.Collector{m.connected, m.up, m.hubConnected, m.state, m.reloadOK, m.reloadOKTime} {
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

func (m *metrics) setUp(id clusterset.ClusterID, up bool) {
	m.up.WithLabelValues(string(id)).Set(gauge(up))
}

// setHubConnected sets the hub's gauge, or (throughHub false: no member
// is read through a hub, or no more) removes it.
func (m *metrics) setHubConnected(throughHub, connected bool) {
	if !throughHub {
		m.hubConnected.Reset()
		return
	}
	m.hubConnected.WithLabelValues().Set(gauge(connected))
}

func gauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// forget drops the series of a member that left.
func (m *metrics) forget(id clusterset.ClusterID) {
	m.connected.DeleteLabelValues(string(id))
	m.up.DeleteLabelValues(string(id))
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

// stateNames lists every state, in order, for the state metric's Help: it
// cannot leave one out.
func stateNames() string {
	names := make([]string, len(states))
	for i, s := range states {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}
