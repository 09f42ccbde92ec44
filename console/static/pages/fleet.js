// The fleet page (#/): a placeholder while the fleet page is written.
export function render(root) {
  const h = document.createElement('h1');
  h.textContent = 'Fleet';
  root.append(h);
  return () => {};
}
