// The console's entry point.
document.body.append(document.createTextNode('sampled console'));
