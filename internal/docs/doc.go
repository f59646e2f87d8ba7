// Package docs holds the tests that keep docs/ true to the code: a page
// that names what the code defines is checked against it.
package docs
