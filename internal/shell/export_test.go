package shell

// MayBackground exposes mayBackground to the black-box tests.
var MayBackground = mayBackground
