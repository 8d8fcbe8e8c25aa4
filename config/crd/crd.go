// Package crd embeds mcs-syncer's own CustomResourceDefinition, so that
// the testbed and tests install exactly the file that is deployed.
package crd

import _ "embed"

// PublishedExportCRD is mcs-syncer.io_publishedexports.yaml.
//
//go:embed mcs-syncer.io_publishedexports.yaml
var PublishedExportCRD []byte
