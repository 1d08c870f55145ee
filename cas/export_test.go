package cas

// White-box: what the black-box tests need to see of the package.

// OwnTemps starts the names of this process's temporary files.
var OwnTemps = ownTemps
