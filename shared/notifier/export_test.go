package notifier

// Variables is the config's field-to-variable map, for the descriptor test.
var Variables = variables
