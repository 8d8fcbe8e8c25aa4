package clusterset

import (
	"context"
	"maps"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Feedback carries what the readers of the exports learn of their fate
// back to the export side, the other way from the Store: an import that
// an object mcs-syncer does not own blocks in a consumer (internal/imports),
// an export that could not be published or a heartbeat that cannot be
// written (internal/publish). The export watcher subscribes to it and
// turns it into the ServiceExport's Ready condition. Safe for concurrent
// use.
type Feedback struct {
	mu sync.RWMutex
	// blocked[key][consumer] says why the import of key cannot be written
	// into consumer.
	blocked map[types.NamespacedName]map[ClusterID]string
	// unpublished[key] says why the local member's export of key could
	// not be published; unheard why none of its exports reaches the
	// others (its marker, its heartbeat, cannot be written).
	unpublished map[types.NamespacedName]string
	unheard     string
	subs        []*subscription
}

// NewFeedback returns a Feedback that says nothing yet.
func NewFeedback() *Feedback {
	return &Feedback{
		blocked:     map[types.NamespacedName]map[ClusterID]string{},
		unpublished: map[types.NamespacedName]string{},
	}
}

// SetImportBlocked records why the import of key cannot be written into
// consumer; an empty why clears it. A change is announced for key.
func (f *Feedback) SetImportBlocked(key types.NamespacedName, consumer ClusterID, why string) {
	f.mu.Lock()
	if f.blocked[key][consumer] == why {
		f.mu.Unlock()
		return
	}
	if why == "" {
		delete(f.blocked[key], consumer)
		if len(f.blocked[key]) == 0 {
			delete(f.blocked, key)
		}
	} else {
		if f.blocked[key] == nil {
			f.blocked[key] = map[ClusterID]string{}
		}
		f.blocked[key][consumer] = why
	}
	f.mu.Unlock()
	f.notify(key)
}

// ImportBlocked returns, by consumer, why the import of key cannot be
// written there (nil when nothing blocks it).
func (f *Feedback) ImportBlocked(key types.NamespacedName) map[ClusterID]string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return maps.Clone(f.blocked[key])
}

// ForgetConsumer clears what consumer said, as it leaves the clusterset:
// its blocks no longer hold.
func (f *Feedback) ForgetConsumer(consumer ClusterID) {
	f.mu.Lock()
	var unblocked []types.NamespacedName
	for key, byConsumer := range f.blocked {
		if _, ok := byConsumer[consumer]; ok {
			unblocked = append(unblocked, key)
		}
	}
	f.mu.Unlock()
	for _, key := range unblocked {
		f.SetImportBlocked(key, consumer, "")
	}
}

// SetUnpublished records why the export of key could not be published
// (the publication server's answer); an empty why clears it. A change is
// announced for key.
func (f *Feedback) SetUnpublished(key types.NamespacedName, why string) {
	f.mu.Lock()
	if f.unpublished[key] == why {
		f.mu.Unlock()
		return
	}
	if why == "" {
		delete(f.unpublished, key)
	} else {
		f.unpublished[key] = why
	}
	f.mu.Unlock()
	f.notify(key)
}

// SetUnheard records why the local member's heartbeat does not reach the
// other members (its marker cannot be written); "" clears it. A change
// asks every subscriber to look at everything (Subscriber.Everything).
func (f *Feedback) SetUnheard(why string) {
	f.mu.Lock()
	if f.unheard == why {
		f.mu.Unlock()
		return
	}
	f.unheard = why
	subs := slices.Clone(f.subs)
	f.mu.Unlock()
	for _, sub := range subs {
		if sub.Everything != nil {
			sub.Everything()
		}
	}
}

// Unpublished returns why the export of key does not reach the other
// members, or "".
func (f *Feedback) Unpublished(key types.NamespacedName) string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if why := f.unpublished[key]; why != "" {
		return why
	}
	if f.unheard != "" {
		return "this member's heartbeat cannot be written: the others keep its endpoints while they cannot read the publication server either, and withdraw them once their grace has run out if they can: " + f.unheard
	}
	return ""
}

// Subscribe registers sub until ctx ends and calls sub.Changed with every
// key the Feedback says something of now. sub.Wants is asked with cluster
// "" (the Feedback is about keys, not about one cluster's exports), and
// sub.Everything is called when what holds for every key changes
// (SetUnheard): the subscriber knows its keys, the Feedback does not.
func (f *Feedback) Subscribe(ctx context.Context, sub Subscriber) {
	entry := &subscription{Subscriber: sub}
	f.mu.Lock()
	f.subs = append(f.subs, entry)
	keys := slices.Collect(maps.Keys(f.blocked))
	for key := range f.unpublished {
		if _, ok := f.blocked[key]; !ok {
			keys = append(keys, key)
		}
	}
	f.mu.Unlock()
	unsubscribeWhenDone(ctx, &f.mu, &f.subs, entry)
	for _, key := range keys {
		entry.tell(key, "")
	}
}

func (f *Feedback) notify(key types.NamespacedName) {
	f.mu.RLock()
	subs := slices.Clone(f.subs)
	f.mu.RUnlock()
	for _, sub := range subs {
		sub.tell(key, "")
	}
}
