// Package configcore is what every binary's config file shares: the
// FIREHOSE_* and flag overrides, the users file, the keys a file gave, the
// runtime section and the loading. It imports no adapter, so that cmd/broker,
// whose file (package app/brokeronly) has only the broker's sections, links
// none; package config composes the bridge's whole file over it.
//
// It must not import a broker: the listener types and default listeners its
// overrides fill in come from internal/mqttlisteners, the users from
// internal/credentials.
package configcore
