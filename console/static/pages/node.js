// The node page (#/node/<id>): a placeholder until the node page lands.
export function render(root, params) {
  const h = document.createElement('h1');
  h.textContent = 'Node ' + params.id;
  root.append(h);
  return () => {};
}
