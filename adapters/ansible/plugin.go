package ansible

import _ "embed" // the callback plugin's source, for `bridge ansible-plugin`

// PluginSource is the callback plugin (collection/plugins/callback/firehose.py),
// built into the bridge so that `bridge ansible-plugin` can put it where
// Ansible loads it, for control nodes that do not use collections.
//
//go:embed collection/plugins/callback/firehose.py
var PluginSource string

// CollectionFQCN is the plugin's name in the opsfirehose.firehose collection.
const CollectionFQCN = "opsfirehose.firehose.firehose"
