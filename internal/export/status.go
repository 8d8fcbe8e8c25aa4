package export

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
)

// notImportedEverywhere starts the part of Ready's message that names the
// consumers where the import is blocked.
const notImportedEverywhere = "not imported everywhere"

// firstPassWait is how long a valid export's status waits for a member
// that answers to finish its first pass (its Health: Answering, since
// Since).
const firstPassWait = 30 * time.Second

// setExported writes Valid=True, Ready=True and the Conflict condition of
// the merge over the Store. While a member that answers is in its first
// pass, it writes nothing and returns when to look again. An import of the
// Service that an object mcs-syncer does not own blocks in some consumer is
// named in Ready's message (and in a Warning event).
func (w *Watcher) setExported(ctx context.Context, se *mcsv1beta1.ServiceExport, cav caveat) (time.Duration, error) {
	key := client.ObjectKeyFromObject(se)
	merged := clusterset.Merge(w.store.Get(key))
	ready := "exported to the clusterset"
	if blocked := w.feedback.ImportBlocked(key); len(blocked) > 0 {
		var whys []string
		for _, consumer := range slices.Sorted(maps.Keys(blocked)) {
			whys = append(whys, blocked[consumer])
		}
		ready += "; " + notImportedEverywhere + ": " + strings.Join(whys, "; ")
	}
	valid := mcsv1beta1.NewServiceExportCondition(mcsv1beta1.ServiceExportConditionValid, metav1.ConditionTrue, mcsv1beta1.ServiceExportReasonValid, "the Service can be exported")
	if cav.reason != "" {
		valid.Reason, valid.Message = string(cav.reason), cav.message
	}
	readyCond := mcsv1beta1.NewServiceExportCondition(mcsv1beta1.ServiceExportConditionReady, metav1.ConditionTrue, mcsv1beta1.ServiceExportReasonExported, ready)
	if why := w.feedback.Unpublished(key); why != "" {
		// The other members cannot see it: whatever they hold of it is
		// what was published before, if anything.
		readyCond.Status, readyCond.Reason = metav1.ConditionFalse, string(mcsv1beta1.ServiceExportReasonFailed)
		readyCond.Message = "not published to the other members: " + why
	}
	conds := []metav1.Condition{valid, readyCond}
	var unheard []string
	for _, id := range w.store.NotSynced(w.membership.IDs()) {
		// A member that answers and is in its first pass is heard from in
		// a moment: one write then (the Store announces every key once the
		// member is synced).
		if h := w.membership.Health(id); h.Answering && time.Since(h.Since) < firstPassWait {
			return firstPassWait - time.Since(h.Since), nil
		}
		unheard = append(unheard, string(id))
	}
	// The Conflict condition of the members that answer: a member that
	// never engaged (forbidden, CRDs missing, unreachable) must not keep
	// every export without one. Its exports may change it later.
	conflict := mcsv1beta1.NewServiceExportCondition(mcsv1beta1.ServiceExportConditionConflict, metav1.ConditionFalse,
		mcsv1beta1.ServiceExportReasonNoConflicts, "no conflicts with the other exports of this Service")
	if merged.Conflict != nil {
		conflict.Status, conflict.Reason, conflict.Message = metav1.ConditionTrue, merged.Conflict.Reason(), merged.Conflict.Message
	}
	if len(unheard) > 0 {
		if was := meta.FindStatusCondition(se.Status.Conditions, string(mcsv1beta1.ServiceExportConditionConflict)); was != nil &&
			was.Status == conflict.Status && was.Reason == conflict.Reason {
			// Only the note on the members not yet heard from would
			// change: what the condition says stands, and is kept as it
			// was. A restarted mcs-syncer, whose first pass over 255
			// members outlasted firstPassWait on a loaded machine, rewrote
			// every export's status twice (make bench-scale: 200 writes
			// for 100 exports), once to add the note and once to remove it.
			conflict.Message = was.Message
		} else {
			conflict.Message += fmt.Sprintf("; not yet heard from %s, whose exports may change this", strings.Join(unheard, ", "))
		}
	}
	return 0, w.writeConditions(ctx, se, nil, append(conds, conflict)...)
}

// setInvalid writes Valid=False with reason and message, Ready=False, and
// removes Conflict (an invalid export is not part of the clusterset).
func (w *Watcher) setInvalid(ctx context.Context, se *mcsv1beta1.ServiceExport, reason mcsv1beta1.ServiceExportConditionReason, message string) error {
	return w.writeConditions(ctx, se, []string{string(mcsv1beta1.ServiceExportConditionConflict)},
		mcsv1beta1.NewServiceExportCondition(mcsv1beta1.ServiceExportConditionValid, metav1.ConditionFalse, reason, message),
		mcsv1beta1.NewServiceExportCondition(mcsv1beta1.ServiceExportConditionReady, metav1.ConditionFalse,
			mcsv1beta1.ServiceExportReasonPending, "not exported until the export is valid"))
}

// writeConditions sets conditions (and removes the types in remove) on a
// copy of se and writes its status only if anything changed.
func (w *Watcher) writeConditions(ctx context.Context, se *mcsv1beta1.ServiceExport, remove []string, conds ...metav1.Condition) error {
	if !w.writeStatus {
		return nil
	}
	updated := se.DeepCopy()
	changed := false
	for _, c := range conds {
		c.ObservedGeneration = se.Generation
		c.Message = clusterset.CutMessage(c.Message)
		changed = meta.SetStatusCondition(&updated.Status.Conditions, c) || changed
	}
	for _, t := range remove {
		changed = meta.RemoveStatusCondition(&updated.Status.Conditions, t) || changed
	}
	if changed {
		switch err := w.client.Status().Update(ctx, updated); {
		case err == nil:
			w.own.Wrote(se.ResourceVersion, updated)
		case !apierrors.IsNotFound(err):
			return fmt.Errorf("update status of ServiceExport %s: %w", klogRef(se), err)
		}
		w.recordProblems(se, updated)
	}
	w.conditions.set(w, client.ObjectKeyFromObject(se), updated.Status.Conditions)
	return nil
}

// recordProblems records a Warning event for each problem that a status
// write just raised: the export became invalid, or a conflict appeared or
// changed.
func (w *Watcher) recordProblems(before, after *mcsv1beta1.ServiceExport) {
	if w.recorder == nil {
		return
	}
	for _, problem := range []struct {
		typ    mcsv1beta1.ServiceExportConditionType
		status metav1.ConditionStatus
	}{
		{mcsv1beta1.ServiceExportConditionValid, metav1.ConditionFalse},
		{mcsv1beta1.ServiceExportConditionConflict, metav1.ConditionTrue},
	} {
		now := meta.FindStatusCondition(after.Status.Conditions, string(problem.typ))
		if now == nil || now.Status != problem.status {
			continue
		}
		if was := meta.FindStatusCondition(before.Status.Conditions, string(problem.typ)); was != nil && was.Status == now.Status && was.Reason == now.Reason && was.Message == now.Message {
			continue
		}
		w.recorder.Eventf(after, nil, corev1.EventTypeWarning, now.Reason, "Export", "%s", now.Message)
	}
	now := meta.FindStatusCondition(after.Status.Conditions, string(mcsv1beta1.ServiceExportConditionReady))
	was := meta.FindStatusCondition(before.Status.Conditions, string(mcsv1beta1.ServiceExportConditionReady))
	if now != nil && strings.Contains(now.Message, notImportedEverywhere) && (was == nil || was.Message != now.Message) {
		w.recorder.Eventf(after, nil, corev1.EventTypeWarning, "ImportBlocked", "Export", "%s", now.Message)
	}
	// Once when publishing starts to fail (the hub is down, the token
	// revoked, the export too large), not on every new wording of the
	// server's answer while it goes on.
	if failed(now) && !failed(was) {
		w.recorder.Eventf(after, nil, corev1.EventTypeWarning, ReasonNotPublished, "Publish", "%s", now.Message)
	}
}

// ReasonNotPublished is the reason of the Warning event on an export that
// can no longer be published to the other members (its Ready turned False
// with reason Failed).
const ReasonNotPublished = "NotPublished"

// failed reports whether a Ready condition says the export failed.
func failed(ready *metav1.Condition) bool {
	return ready != nil && ready.Status == metav1.ConditionFalse && ready.Reason == string(mcsv1beta1.ServiceExportReasonFailed)
}
