package plumbing

// Keys holds one copy of each of a few label keys, for the cache
// transforms of objects held by the thousand: a decoder allocates every
// key of every labels map anew (40 bytes or more each for the MCS API's
// and EndpointSlice's keys, three or four per object), though each object
// of a kind carries the same ones. At 255 members an importer holds
// 25,000 imported slices and as many publications.
type Keys map[string]string

// NewKeys returns the Keys of keys.
func NewKeys(keys ...string) Keys {
	k := make(Keys, len(keys))
	for _, key := range keys {
		k[key] = key
	}
	return k
}

// Share returns labels with each of its keys that k holds as k's copy:
// labels itself when it has none of them, otherwise a new map, equal to
// labels. The map given is not modified. A cache transform sees each
// decoded object once, so the map is copied once.
func (k Keys) Share(labels map[string]string) map[string]string {
	known := false
	for key := range labels {
		if _, known = k[key]; known {
			break
		}
	}
	if !known {
		return labels
	}
	out := make(map[string]string, len(labels))
	for key, v := range labels {
		if own, ok := k[key]; ok {
			key = own
		}
		out[key] = v
	}
	return out
}
