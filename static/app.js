// faultline: the only script. Copy buttons for code blocks, a jump to the first evidence line, and
// files dropped on the analyze form. Everything works without it.
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
  // Files dropped anywhere on the analyze form go into its file input, as if chosen.
  for (const form of document.querySelectorAll("form[data-drop]")) {
    const input = form.querySelector("input[type=file]");
    const status = form.querySelector("#dropped");
    if (!input) continue;
    const show = () => {
      if (status) status.textContent = input.files.length > 1
        ? `${input.files.length} files: ${Array.from(input.files, (f) => f.name).join(", ")}`
        : "";
    };
    form.addEventListener("dragover", (event) => {
      event.preventDefault();
      form.classList.add("dropping");
    });
    form.addEventListener("dragleave", () => form.classList.remove("dropping"));
    form.addEventListener("drop", (event) => {
      event.preventDefault();
      form.classList.remove("dropping");
      if (event.dataTransfer && event.dataTransfer.files.length > 0) {
        input.files = event.dataTransfer.files;
        show();
      }
    });
    input.addEventListener("change", show);
  }
  const first = document.querySelector(".log .ln.ev");
  const log = document.querySelector(".log");
  if (first && log) log.scrollTop = Math.max(0, first.offsetTop - log.offsetTop - 60);
});
