package export

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
)

// conditionCounts count the ServiceExports by the conditions that this
// mcs-syncer last gave them (mcs_syncer_service_exports_by_condition): the
// series an alert on exports that are not Ready, invalid or in conflict
// reads. Each watcher that writes status (WriteStatus) keeps its own
// member's, from its first status write until it stops; a member's
// ServiceExport counts once its conditions were written or found as they
// must be. One mcs-syncer's watchers share one (Metrics).
func newConditionCounts() *conditionCounts {
	return &conditionCounts{byWatcher: map[*Watcher]map[types.NamespacedName][]metav1.Condition{}}
}

// countedConditions are the condition types counted, with both statuses.
var countedConditions = []mcsv1beta1.ServiceExportConditionType{
	mcsv1beta1.ServiceExportConditionValid, mcsv1beta1.ServiceExportConditionReady, mcsv1beta1.ServiceExportConditionConflict,
}

var exportConditionsDesc = prometheus.NewDesc("mcs_syncer_service_exports_by_condition",
	"ServiceExports of the member cluster whose condition has the status (True, False), as mcs-syncer last wrote them.",
	[]string{"cluster", "condition", "status"}, nil)

type conditionCounts struct {
	mu        sync.Mutex
	byWatcher map[*Watcher]map[types.NamespacedName][]metav1.Condition
}

// set records the conditions of w's ServiceExport key.
func (c *conditionCounts) set(w *Watcher, key types.NamespacedName, conds []metav1.Condition) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.byWatcher[w]
	if m == nil {
		m = map[types.NamespacedName][]metav1.Condition{}
		c.byWatcher[w] = m
	}
	m[key] = conds
}

// forget drops w's ServiceExport key (deleted).
func (c *conditionCounts) forget(w *Watcher, key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byWatcher[w], key)
}

// stopped drops what w counted: a member that left, or one that returns
// under a new watcher, which counts afresh.
func (c *conditionCounts) stopped(w *Watcher) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byWatcher, w)
}

func (c *conditionCounts) Describe(ch chan<- *prometheus.Desc) { ch <- exportConditionsDesc }

// Collect reports each counting member's counts, zeros included, so that
// an alert's series exist before the first problem.
func (c *conditionCounts) Collect(ch chan<- prometheus.Metric) {
	type series struct {
		cluster clusterset.ClusterID
		typ     string
		status  metav1.ConditionStatus
	}
	counts := map[series]int{}
	c.mu.Lock()
	for w, exports := range c.byWatcher {
		for _, typ := range countedConditions {
			for _, status := range []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse} {
				counts[series{w.cluster, string(typ), status}] += 0
			}
		}
		for _, conds := range exports {
			for _, cond := range conds {
				s := series{w.cluster, cond.Type, cond.Status}
				if _, counted := counts[s]; counted {
					counts[s]++
				}
			}
		}
	}
	c.mu.Unlock()
	for s, n := range counts {
		ch <- prometheus.MustNewConstMetric(exportConditionsDesc, prometheus.GaugeValue, float64(n), string(s.cluster), s.typ, string(s.status))
	}
}
