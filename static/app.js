// faultline: the only script. Copy buttons for code blocks, and a jump to the first evidence line.
// Everything works without it.
document.addEventListener("DOMContentLoaded", () => {
  for (const button of document.querySelectorAll("button[data-copy]")) {
    button.addEventListener("click", async () => {
      const code = button.parentElement.querySelector("code");
      if (!code) return;
      try {
        await navigator.clipboard.writeText(code.textContent);
        button.textContent = "Copied";
      } catch {
        button.textContent = "Select and copy";
      }
      setTimeout(() => { button.textContent = "Copy"; }, 1500);
    });
  }
  const first = document.querySelector(".log .ln.ev");
  const log = document.querySelector(".log");
  if (first && log) log.scrollTop = Math.max(0, first.offsetTop - log.offsetTop - 60);
});
