// The perfkit tab: perfkit serve's pages, served by this plugin under ./app/, fill the tab.
export async function render() {
  document.body.style.margin = "0";
  const frame = document.createElement("iframe");
  frame.src = "./app/runs";
  frame.title = "perfkit";
  frame.style.cssText = "border:0;width:100%;height:100vh;display:block";
  document.body.appendChild(frame);
}
