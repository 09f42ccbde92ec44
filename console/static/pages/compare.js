// The compare page (#/compare): a placeholder until the compare page lands.
export function render(root) {
  const h = document.createElement('h1');
  h.textContent = 'Compare';
  root.append(h);
  return () => {};
}
