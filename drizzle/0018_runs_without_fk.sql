ALTER TABLE `punctual_task_runs` DROP FOREIGN KEY `task_runs_task_fk`;
